use super::*;

fn hit(id: i64, path: &str, snippet: &str, score: f64) -> Candidate {
    Candidate {
        id,
        path: path.to_string(),
        start_line: 1,
        end_line: 2,
        source: Source::Memory,
        snippet: snippet.to_string(),
        score,
    }
}

fn options(vw: f64, tw: f64) -> MergeOptions<'static> {
    MergeOptions {
        vector_weight: vw,
        text_weight: tw,
        decay: None,
        mmr_lambda: None,
    }
}

#[test]
fn weighted_scores_match_the_reference_case() {
    let merged = merge_hybrid_results(
        vec![hit(1, "a.md", "vec-a", 0.9)],
        vec![hit(2, "b.md", "kw-b", 1.0)],
        &options(0.7, 0.3),
    );
    assert_eq!(merged.len(), 2);
    assert_eq!(merged[0].path, "a.md");
    assert!((merged[0].score - 0.63).abs() < 1e-12);
    assert!(!merged[0].keyword_hit);
    assert!((merged[1].score - 0.3).abs() < 1e-12);
    assert!(merged[1].keyword_hit);
}

#[test]
fn an_overlapping_id_adds_both_sides_and_takes_the_keyword_snippet() {
    let merged = merge_hybrid_results(
        vec![hit(1, "a.md", "vec-a", 0.2)],
        vec![hit(1, "a.md", "kw-a", 1.0)],
        &options(0.5, 0.5),
    );
    assert_eq!(merged.len(), 1);
    assert!((merged[0].score - 0.6).abs() < 1e-12);
    assert_eq!(merged[0].snippet, "kw-a");
}

#[test]
fn an_empty_keyword_snippet_keeps_the_vector_one() {
    let merged = merge_hybrid_results(
        vec![hit(1, "a.md", "vec-a", 0.2)],
        vec![hit(1, "a.md", "", 1.0)],
        &options(0.5, 0.5),
    );
    assert_eq!(merged[0].snippet, "vec-a");
}

#[test]
fn decay_applies_before_the_sort() {
    let day = 86_400_000i64;
    let old = crate::decay::date_from_path("memory/2026-01-01.md").unwrap();
    let mtime = |_: &str| None;
    let options = MergeOptions {
        vector_weight: 0.7,
        text_weight: 0.3,
        decay: Some(DecayContext {
            now_ms: old + 60 * day,
            half_life_days: 30.0,
            mtime_ms: &mtime,
        }),
        mmr_lambda: None,
    };
    let merged = merge_hybrid_results(
        vec![
            hit(1, "memory/2026-01-01.md", "old", 1.0),
            hit(2, "MEMORY.md", "evergreen", 0.5),
        ],
        vec![],
        &options,
    );
    // 0.7 × 1.0 decayed over two half-lives is 0.175, below the evergreen 0.35.
    assert_eq!(merged[0].path, "MEMORY.md");
    assert!((merged[1].score - 0.175).abs() < 1e-12);
}

#[test]
fn equal_scores_sort_by_path() {
    let merged = merge_hybrid_results(
        vec![hit(1, "b.md", "x", 0.5), hit(2, "a.md", "y", 0.5)],
        vec![],
        &options(1.0, 0.0),
    );
    assert_eq!(merged[0].path, "a.md");
}
