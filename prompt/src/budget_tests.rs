use super::*;
use proptest::prelude::*;

fn file(name: &str, content: &str) -> SourceFile {
    SourceFile {
        name: name.to_string(),
        path: PathBuf::from(format!("/ws/{name}")),
        content: Some(content.to_string()),
    }
}

fn content_of<'a>(out: &'a Budgeted, name: &str) -> Option<&'a str> {
    out.files
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.content.as_str())
}

#[test]
fn water_filling_meets_small_needs_and_splits_the_rest_evenly() {
    assert_eq!(water_fill(&[10, 1000, 20], 100), [10, 70, 20]);
    assert_eq!(water_fill(&[10, 1000, 1000], 100), [10, 45, 45]);
    assert_eq!(water_fill(&[1000, 1000], 151), [76, 75]);
    assert_eq!(water_fill(&[5, 5], 100), [5, 5]);
    assert_eq!(water_fill(&[], 100), Vec::<usize>::new());
    assert_eq!(water_fill(&[3, 3, 3], 2), [1, 1, 0]);
}

#[test]
fn memory_gets_its_share_when_the_earlier_files_are_large() {
    // Issue 19453: AGENTS.md and SOUL.md at the per-file cap leave MEMORY.md, loaded last,
    // nothing when the total is spent in load order.
    let big = "a".repeat(30_000);
    let memory = "m".repeat(12_000);
    let sources = [
        file("AGENTS.md", &big),
        file("SOUL.md", &big),
        file("TOOLS.md", &big),
        file("MEMORY.md", &memory),
    ];
    let out = apply_budget(&sources, BootstrapLimits::new(20_000, 40_000));
    let total: usize = out.files.iter().map(|f| units(&f.content)).sum();
    assert!(total <= 40_000, "{total}");
    // Four files, 40,000 to share: 10,000 each, and MEMORY.md keeps most of itself.
    let memory_out = content_of(&out, "MEMORY.md").unwrap();
    assert!(
        (9_990..=10_000).contains(&units(memory_out)),
        "{}",
        units(memory_out)
    );
    assert!(memory_out.starts_with(&"m".repeat(6_000)));
    assert!(memory_out.contains("[...truncated, read MEMORY.md for full content...]"));
    let stat = out.stats.iter().find(|s| s.name == "MEMORY.md").unwrap();
    assert!(stat.cut_by_total && !stat.cut_by_file_cap);
    assert!(stat.kept_chars > 9_000, "{}", stat.kept_chars);
    for name in ["AGENTS.md", "SOUL.md", "TOOLS.md"] {
        let len = units(content_of(&out, name).unwrap());
        assert!((9_990..=10_000).contains(&len), "{name}: {len}");
    }
}

#[test]
fn a_small_file_is_never_cut_because_earlier_files_are_large() {
    let sources = [
        file("AGENTS.md", &"a".repeat(5_000)),
        file("SOUL.md", &"b".repeat(5_000)),
        file("USER.md", "Call me Sam."),
    ];
    let out = apply_budget(&sources, BootstrapLimits::new(20_000, 3_000));
    assert_eq!(content_of(&out, "USER.md"), Some("Call me Sam."));
    let others: Vec<usize> = ["AGENTS.md", "SOUL.md"]
        .iter()
        .map(|n| units(content_of(&out, n).unwrap()))
        .collect();
    // Each gets half of what USER.md leaves, up to the few units the marker's granularity
    // leaves unused.
    for len in others {
        assert!((1_485..=1_494).contains(&len), "{len}");
    }
}

#[test]
fn under_the_total_the_result_is_the_per_file_cut_alone() {
    let sources = [file("AGENTS.md", &"x".repeat(30_000)), file("USER.md", "u")];
    let out = apply_budget(&sources, BootstrapLimits::default());
    let agents = content_of(&out, "AGENTS.md").unwrap();
    assert!(agents.starts_with(&format!("{}\n\n[...truncated", "x".repeat(14_000))));
    assert!(agents.contains("…(truncated AGENTS.md: kept 14000+4000 chars of 30000)…"));
    assert!(agents.ends_with(&format!("\n\n{}", "x".repeat(4_000))));
    assert_eq!(
        out.warnings,
        [BootstrapWarning::Truncated {
            name: "AGENTS.md".into(),
            chars: 30_000,
            limit: 20_000
        }]
    );
}

#[test]
fn a_share_that_holds_the_marker_keeps_head_and_tail() {
    let sources = [
        file("AGENTS.md", &"a".repeat(2_000)),
        file("SOUL.md", &"s".repeat(2_000)),
    ];
    let out = apply_budget(&sources, BootstrapLimits::new(20_000, 1_000));
    for name in ["AGENTS.md", "SOUL.md"] {
        let text = content_of(&out, name).unwrap();
        assert!(units(text) <= 500, "{name}: {}", units(text));
        assert!(text.contains(&format!("[...truncated, read {name} for full content...]")));
    }
}

#[test]
fn a_share_under_64_leaves_the_latest_starved_file_out_and_gives_its_share_back() {
    let sources = [
        file("AGENTS.md", &"a".repeat(1_000)),
        file("SOUL.md", &"s".repeat(1_000)),
        file("MEMORY.md", &"m".repeat(1_000)),
    ];
    // 150 over three is 50 each, under 64: MEMORY.md goes, the other two get 75.
    let out = apply_budget(&sources, BootstrapLimits::new(100, 150));
    let names: Vec<&str> = out.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["AGENTS.md", "SOUL.md"]);
    assert!(out.warnings.contains(&BootstrapWarning::Skipped {
        name: "MEMORY.md".into(),
        share: 50
    }));
    let skipped = out
        .warnings
        .iter()
        .find(|w| matches!(w, BootstrapWarning::Skipped { .. }))
        .unwrap();
    assert!(skipped.to_string().contains("MEMORY.md is 50 chars (<64)"));
}

#[test]
fn unicode_is_never_split() {
    let sources = [file("AGENTS.md", &"😀".repeat(500))];
    let out = apply_budget(&sources, BootstrapLimits::new(100, 101));
    let text = &out.files[0].content;
    assert!(units(text) <= 101);
    assert!(text.ends_with('…'));
}

proptest! {
    #[test]
    fn water_filling_is_fair_and_within_budget(
        needs in proptest::collection::vec(1usize..5_000, 0..9),
        budget in 0usize..20_000,
    ) {
        let shares = water_fill(&needs, budget);
        let sum: usize = shares.iter().sum();
        prop_assert!(sum <= budget);
        prop_assert_eq!(sum, budget.min(needs.iter().sum()));
        for (i, (&s, &n)) in shares.iter().zip(&needs).enumerate() {
            prop_assert!(s <= n);
            // Anyone short of their need got at least as much as anyone else (to one unit).
            if s < n {
                prop_assert!(shares.iter().all(|&o| o <= s + 1), "{i}: {shares:?}");
            }
        }
    }

    #[test]
    fn the_total_is_a_hard_cap(
        sizes in proptest::collection::vec(0usize..3_000, 1..8),
        per_file in 1usize..2_000,
        total in 1usize..6_000,
    ) {
        let names = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"];
        let sources: Vec<SourceFile> = sizes
            .iter()
            .zip(names)
            .map(|(&n, name)| file(name, &"x".repeat(n)))
            .collect();
        let out = apply_budget(&sources, BootstrapLimits::new(per_file, total));
        let sum: usize = out.files.iter().map(|f| units(&f.content)).sum();
        prop_assert!(sum <= total, "{sum} > {total}");
    }
}
