use super::*;

#[test]
fn case_22_a_long_line_is_cut_into_chunks_within_the_budget() {
    let content = "a".repeat(4825);
    for overlap in [0, 80] {
        let chunks = chunk_markdown(&content, 400, overlap);
        assert!(
            chunks.len() > 1,
            "overlap {overlap}: {} chunks",
            chunks.len()
        );
        for chunk in &chunks {
            assert!(
                chunk.text.chars().count() <= 1600,
                "overlap {overlap}: a chunk of {} chars",
                chunk.text.len()
            );
            assert_eq!((chunk.start_line, chunk.end_line), (1, 1));
        }
        let total: usize = chunks.iter().map(|c| c.text.len()).sum();
        assert!(total >= 4825, "text was lost: {total} of 4825 chars");
    }
}

#[test]
fn case_22_cjk_text_makes_more_chunks_than_ascii_of_equal_length() {
    let ascii = "a".repeat(4000);
    let cjk = "记".repeat(4000);
    let a = chunk_markdown(&ascii, 400, 0);
    let c = chunk_markdown(&cjk, 400, 0);
    assert!(c.len() > a.len(), "cjk {} vs ascii {}", c.len(), a.len());
    // Every CJK chunk is within the weighted budget: 400 characters of weight 4.
    for chunk in &c {
        assert!(
            weighted_len(&chunk.text) <= 1600,
            "{}",
            weighted_len(&chunk.text)
        );
    }
}

#[test]
fn lines_are_one_based_and_overlap_is_carried() {
    let lines: Vec<String> = (1..=40)
        .map(|i| format!("line {i:02} {}", "x".repeat(30)))
        .collect();
    let content = lines.join("\n");
    // 20 tokens = 80 chars a chunk; each line weighs 38 + 1, so two lines a chunk.
    let chunks = chunk_markdown(&content, 20, 0);
    assert_eq!(chunks[0].start_line, 1);
    assert!(chunks[0].text.starts_with("line 01"));
    let last = chunks.last().unwrap();
    assert_eq!(last.end_line, 40);
    // With an overlap, the next chunk starts on the last line of the previous one.
    let chunks = chunk_markdown(&content, 20, 5);
    assert!(chunks.len() > 2);
    for pair in chunks.windows(2) {
        assert_eq!(pair[1].start_line, pair[0].end_line, "{pair:?}");
    }
}

#[test]
fn the_hash_is_the_sha256_of_the_text() {
    let chunks = chunk_markdown("hello", 400, 80);
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        chunks[0].hash,
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    assert_eq!(chunks[0].text, "hello");
}

#[test]
fn blank_content_makes_no_chunks() {
    assert!(chunk_markdown("", 400, 80).is_empty());
    assert!(chunk_markdown("\n\n   \n", 400, 80).is_empty());
}

#[test]
fn small_files_are_one_chunk_with_all_their_lines() {
    let chunks = chunk_markdown("# Title\n\nSome fact.\n", 400, 80);
    assert_eq!(chunks.len(), 1);
    assert_eq!((chunks[0].start_line, chunks[0].end_line), (1, 4));
    assert_eq!(chunks[0].text, "# Title\n\nSome fact.\n");
}

#[test]
fn the_minimum_budget_is_32_chars() {
    let chunks = chunk_markdown(&"b".repeat(100), 1, 0);
    assert!(chunks.iter().all(|c| c.text.len() <= 32));
    assert_eq!(chunks.iter().map(|c| c.text.len()).sum::<usize>(), 100);
}

#[test]
fn cuts_never_split_a_character() {
    let text = "é😀記".repeat(700);
    for chunk in chunk_markdown(&text, 50, 10) {
        // Building a String already proves UTF-8; check no piece was lost or doubled oddly.
        assert!(!chunk.text.is_empty());
    }
}
