use super::*;

fn input(window: u64, reserve: u64, tokens: u64) -> FlushInput {
    FlushInput {
        window,
        reserve,
        tokens,
        fresh: true,
        transcript_bytes: 0,
        compactions: 0,
        flushed_in_cycle: None,
    }
}

fn soft(soft: u64) -> MemoryFlushSettings {
    MemoryFlushSettings {
        soft_threshold_tokens: soft,
        ..MemoryFlushSettings::default()
    }
}

/// Reference case 18, row by row.
#[test]
fn the_reference_gate_cases() {
    // 100 / 10 / 5 with 85 tokens: exactly at the threshold.
    assert_eq!(
        flush_decision(&soft(5), &input(100, 10, 85)),
        FlushDecision::DueTokens { threshold: 85 }
    );
    // 100k / 20k / 10k with 10k: far below.
    assert!(!flush_decision(&soft(10_000), &input(100_000, 20_000, 10_000)).is_due());
    // Flushed in cycle 2, and 2 compactions: already done this cycle.
    let done = FlushInput {
        compactions: 2,
        flushed_in_cycle: Some(2),
        ..input(100_000, 20_000, 96_000)
    };
    assert_eq!(
        flush_decision(&soft(4_000), &done),
        FlushDecision::AlreadyFlushed
    );
    // 96k, but the count is stale.
    let stale = FlushInput {
        fresh: false,
        ..input(128_000, 20_000, 96_000)
    };
    assert_eq!(flush_decision(&soft(4_000), &stale), FlushDecision::Stale);
    // A flush recorded in cycle 0 counts as done in cycle 0.
    let zero = FlushInput {
        flushed_in_cycle: Some(0),
        ..input(100, 10, 99)
    };
    assert_eq!(
        flush_decision(&soft(5), &zero),
        FlushDecision::AlreadyFlushed
    );
}

/// Pain point 47143: before the first compaction (0 compactions) a flush that never ran is
/// due, where OpenClaw read "0 == 0" as already flushed.
#[test]
fn it_fires_before_the_first_compaction() {
    let first = input(100_000, 20_000, 80_000);
    assert_eq!(first.compactions, 0);
    assert!(flush_decision(&MemoryFlushSettings::default(), &first).is_due());
    // And again in the next cycle, once.
    let next = FlushInput {
        compactions: 1,
        flushed_in_cycle: Some(0),
        ..first.clone()
    };
    assert!(flush_decision(&MemoryFlushSettings::default(), &next).is_due());
}

/// Pain point 25880: with the effective reserve, the flush threshold is below the compaction
/// trigger, so the flush comes first; with the floor it came after.
#[test]
fn the_effective_reserve_puts_the_flush_before_the_compaction() {
    use crate::compaction::settings::CompactionSettings;
    let settings = CompactionSettings {
        reserve_tokens: Some(40_000),
        ..CompactionSettings::default()
    };
    let window = 128_000;
    let reserve = settings.reserve_for(window, None);
    let trigger = window - reserve;
    let flush = flush_threshold(window, reserve, DEFAULT_SOFT);
    assert!(flush < trigger, "{flush} < {trigger}");
    // OpenClaw's threshold, from the floor (20,000), lies past the trigger: never reached.
    let floor_threshold = flush_threshold(window, 20_000, DEFAULT_SOFT);
    assert!(floor_threshold > trigger);
}

const DEFAULT_SOFT: u64 = crate::compaction::settings::DEFAULT_MEMORY_FLUSH_SOFT_TOKENS;

#[test]
fn a_large_transcript_forces_it_and_off_means_off() {
    let big = FlushInput {
        transcript_bytes: 3 * 1024 * 1024,
        ..input(100_000, 20_000, 1_000)
    };
    assert_eq!(
        flush_decision(&MemoryFlushSettings::default(), &big),
        FlushDecision::DueTranscriptSize
    );
    let off = MemoryFlushSettings {
        enabled: false,
        ..MemoryFlushSettings::default()
    };
    assert_eq!(flush_decision(&off, &big), FlushDecision::Disabled);
}

#[test]
fn settings_read_from_the_config_table() {
    use crate::compaction::settings::CompactionSettings;
    let s = CompactionSettings::from_value(&serde_json::json!({
        "memoryFlush": {"softThresholdTokens": 6000, "enabled": false}
    }))
    .unwrap();
    assert_eq!(s.memory_flush.soft_threshold_tokens, 6000);
    assert!(!s.memory_flush.enabled);
    let e = CompactionSettings::from_value(&serde_json::json!({"memoryFlush": {"soft": 1}}))
        .unwrap_err();
    assert!(e.to_string().contains("softThresholdTokens"), "{e}");
}
