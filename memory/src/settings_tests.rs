use super::*;

#[test]
fn defaults_are_openclaws() {
    let s = MemorySettings::default();
    assert!(s.enabled);
    assert_eq!(s.sources, vec![Source::Memory]);
    assert_eq!((s.chunk_tokens, s.chunk_overlap), (400, 80));
    assert_eq!((s.max_results, s.min_score), (6, 0.35));
    assert!(s.hybrid_enabled);
    assert_eq!((s.vector_weight, s.text_weight), (0.7, 0.3));
    assert_eq!(s.candidate_multiplier, 4.0);
    assert!(!s.mmr_enabled);
    assert_eq!(s.mmr_lambda, 0.7);
    assert!(!s.temporal_decay_enabled);
    assert_eq!(s.half_life_days, 30.0);
    assert!(s.cache_enabled);
    assert_eq!(s.snippet_max_chars, 700);
    assert_eq!(s.citations, CitationsMode::Auto);
    assert_eq!(s.watch_debounce, Duration::from_millis(1500));
}

#[test]
fn weights_are_clamped_then_normalised() {
    let s = MemorySettings {
        vector_weight: 3.0,
        text_weight: 1.0,
        ..Default::default()
    };
    // 3 is clamped to 1 first, so the split is 1:1, not 3:1.
    assert_eq!(s.effective_weights(), (0.5, 0.5));
    let s = MemorySettings {
        vector_weight: -1.0,
        text_weight: 0.2,
        ..Default::default()
    };
    assert_eq!(s.effective_weights(), (0.0, 1.0));
    let s = MemorySettings {
        vector_weight: 0.0,
        text_weight: 0.0,
        ..Default::default()
    };
    assert_eq!(s.effective_weights(), (0.7, 0.3));
    let s = MemorySettings {
        vector_weight: 0.35,
        text_weight: 0.15,
        ..Default::default()
    };
    let (v, t) = s.effective_weights();
    assert!((v - 0.7).abs() < 1e-12 && (t - 0.3).abs() < 1e-12);
}

#[test]
fn multiplier_overlap_half_life_and_lambda_are_clamped() {
    let s = MemorySettings {
        candidate_multiplier: 50.0,
        chunk_tokens: 10,
        chunk_overlap: 40,
        half_life_days: 0.25,
        mmr_lambda: 1.5,
        ..Default::default()
    };
    let c = s.clamped();
    assert_eq!(c.candidate_multiplier, 20.0);
    assert_eq!(c.chunk_overlap, 9);
    assert_eq!(c.half_life_days, 1.0);
    assert_eq!(c.mmr_lambda, 1.0);
    let low = MemorySettings {
        candidate_multiplier: 0.1,
        ..Default::default()
    };
    assert_eq!(low.effective_candidate_multiplier(), 1.0);
}

#[test]
fn candidates_follow_the_formula() {
    let s = MemorySettings::default();
    assert_eq!(s.candidates(6), 24);
    assert_eq!(s.candidates(0), 1);
    assert_eq!(s.candidates(100), 200);
    let s = MemorySettings {
        candidate_multiplier: 1.5,
        ..Default::default()
    };
    assert_eq!(s.candidates(3), 4);
}

#[test]
fn citations_auto_means_direct_chats_only() {
    assert!(CitationsMode::Auto.applies_to(None));
    assert!(CitationsMode::Auto.applies_to(Some("agent:main:main")));
    assert!(!CitationsMode::Auto.applies_to(Some("agent:main:telegram:group:42")));
    assert!(!CitationsMode::Auto.applies_to(Some("agent:main:discord:channel:7")));
    assert!(CitationsMode::On.applies_to(Some("agent:main:telegram:group:42")));
    assert!(!CitationsMode::Off.applies_to(None));
}
