//! The breakdown tiles the prompt: whatever the inputs, every byte of the text belongs to
//! exactly one part, in order, so per-part token counts add up to the whole.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use proptest::prelude::*;
use rampart_prompt::*;

/// Text with the awkward bits: CRLF, lone CR, trailing blanks, blank runs, non-ASCII, emoji.
fn messy_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("word".to_string()),
            Just(" ".to_string()),
            Just("\t".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            Just("\r".to_string()),
            Just("\n\n\n".to_string()),
            Just("é…".to_string()),
            Just("😀".to_string()),
            Just(CACHE_BOUNDARY.to_string()),
            "[a-z ]{0,12}",
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

fn optional_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(messy_text())
}

const NAMES: [&str; 8] = [
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
];

prop_compose! {
    fn inputs()(
        mode in prop_oneof![Just(PromptMode::Full), Just(PromptMode::Minimal), Just(PromptMode::None)],
        tool_mask in 0u32..64,
        files in proptest::collection::vec(proptest::option::of(optional_text()), 8),
        per_file in 0usize..400,
        total in 0usize..1500,
        time_zone in proptest::option::of("[A-Za-z/_]{0,20}"),
        extra in optional_text(),
        heartbeat in optional_text(),
        system_override in proptest::option::weighted(0.15, messy_text()),
        addition in optional_text(),
        include_memory in any::<bool>(),
    ) -> PromptInputs {
        let all_tools = ["read", "Exec", "process", "memory_search", "memory_get", "custom"];
        let tools = all_tools
            .iter()
            .enumerate()
            .filter(|(i, _)| tool_mask & (1 << i) != 0)
            .map(|(_, n)| ToolInfo::named(*n))
            .collect();
        // None: the file is not in the set; Some(None): missing; Some(Some(text)): present.
        let sources: Vec<SourceFile> = files
            .into_iter()
            .zip(NAMES)
            .filter_map(|(f, name)| {
                f.map(|content| SourceFile {
                    name: name.to_string(),
                    path: PathBuf::from(format!("/ws/{name}")),
                    content,
                })
            })
            .collect();
        let bootstrap = BootstrapSet::from_sources(
            "/ws",
            &sources,
            BootstrapLimits::new(per_file, total),
        );
        let skills = SkillCatalog::from_skills(
            vec![Skill {
                name: "s".into(),
                description: "d".into(),
                location: "/ws/skills/s/SKILL.md".into(),
                source: SkillSource::Workspace,
                model_invocable: true,
            }],
            SkillLimits::default(),
            None,
        );
        PromptInputs {
            mode,
            tools,
            skills: Some(Arc::new(skills)),
            memory: MemorySection { include: include_memory, citations: CitationsMode::Auto },
            workspace_dir: "/ws".into(),
            bootstrap: Arc::new(bootstrap),
            time_zone,
            extra_system_prompt: extra,
            heartbeat_prompt: heartbeat,
            system_prompt_override: system_override,
            engine_addition: addition,
            ..PromptInputs::default()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        // Integration tests have no lib.rs beside them to keep regressions next to.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_parts_tile_the_text(inputs in inputs()) {
        let built = build_system_prompt(&inputs);
        let mut at = 0;
        for part in &built.parts {
            prop_assert_eq!(part.range.start, at, "gap or overlap before {}", part.kind.label());
            prop_assert!(part.range.end > part.range.start, "empty part {}", part.kind.label());
            prop_assert!(built.text.is_char_boundary(part.range.start));
            prop_assert!(built.text.is_char_boundary(part.range.end));
            at = part.range.end;
        }
        prop_assert_eq!(at, built.text.len());
        let joined: String = built.iter_parts().map(|(_, t)| t).collect();
        prop_assert_eq!(&joined, &built.text);
        // Neighbouring parts are of different kinds (one part per run).
        for pair in built.parts.windows(2) {
            prop_assert_ne!(&pair[0].kind, &pair[1].kind);
        }
    }

    #[test]
    fn the_marker_part_is_the_marker_and_the_addition_follows_it(inputs in inputs()) {
        let built = build_system_prompt(&inputs);
        let markers: Vec<&PromptPart> = built
            .parts
            .iter()
            .filter(|p| p.kind == PartKind::CacheBoundary)
            .collect();
        prop_assert!(markers.len() <= 1);
        if let Some(marker) = markers.first() {
            prop_assert!(built.part_text(marker).starts_with(CACHE_BOUNDARY));
            // A provider splitting the text finds this marker, not one smuggled in by a file.
            prop_assert_eq!(built.text.find(CACHE_BOUNDARY), Some(marker.range.start));
        }
        let addition = inputs
            .engine_addition
            .as_deref()
            .map(rampart_prompt::marker::normalize_addition)
            .unwrap_or_default();
        if !addition.is_empty() {
            let at = built.parts.iter().position(|p| p.kind == PartKind::EngineAddition).unwrap();
            let text = built.part_text(&built.parts[at]);
            prop_assert!(text.starts_with(&addition));
            if at > 0 {
                prop_assert_eq!(&built.parts[at - 1].kind, &PartKind::CacheBoundary);
            }
        }
    }
}
