use super::*;

#[test]
fn build_fts_query_matches_the_reference_cases() {
    assert_eq!(
        build_fts_query("hello world").as_deref(),
        Some(r#""hello" AND "world""#)
    );
    assert_eq!(
        build_fts_query("FOO_bar baz-1").as_deref(),
        Some(r#""FOO_bar" AND "baz" AND "1""#)
    );
    assert_eq!(
        build_fts_query("金银价格").as_deref(),
        Some(r#""金银价格""#)
    );
    assert_eq!(build_fts_query("   "), None);
    assert_eq!(build_fts_query("?!- \"\""), None);
}

#[test]
fn quotes_cannot_escape_a_token() {
    assert_eq!(
        build_fts_query(r#"say "hi" OR x"#).as_deref(),
        Some(r#""say" AND "hi" AND "OR" AND "x""#)
    );
}

#[test]
fn the_match_expression_spaces_cjk_letters_into_a_phrase() {
    let q = FtsQuery::parse("金银价格 gold").unwrap();
    assert_eq!(q.match_expression(), r#""金 银 价 格" AND "gold""#);
    let q = FtsQuery::parse("abc").unwrap();
    assert_eq!(q.match_expression(), r#""abc""#);
}

#[test]
fn index_text_leaves_latin_alone_and_splits_cjk() {
    assert!(matches!(
        index_text("plain text"),
        Cow::Borrowed("plain text")
    ));
    assert_eq!(index_text("今天金价"), " 今  天  金  价 ");
    assert_eq!(index_text("a记b"), "a 记 b");
    // Punctuation is not a letter, so it is not spaced.
    assert_eq!(index_text("。"), "。");
}

#[test]
fn bm25_rank_to_score_matches_the_reference_cases() {
    assert_eq!(bm25_rank_to_score(0.0), 1.0);
    assert_eq!(bm25_rank_to_score(1.0), 0.5);
    assert_eq!(bm25_rank_to_score(-1.0), 0.5);
    assert!((bm25_rank_to_score(-3.0) - 0.75).abs() < 1e-12);
    assert_eq!(bm25_rank_to_score(f64::NAN), 0.001);
    assert_eq!(bm25_rank_to_score(f64::NEG_INFINITY), 0.001);
}

#[test]
fn keywords_drop_stop_words_and_short_words() {
    assert_eq!(
        extract_keywords("What did we decide about the Postgres migration?"),
        vec!["decide", "postgres", "migration"]
    );
    assert_eq!(extract_keywords("a I x"), Vec::<String>::new());
}

#[test]
fn chinese_keywords_are_character_pairs() {
    assert_eq!(extract_keywords("金银价格"), vec!["金银", "银价", "价格"]);
    // Particles cut a run; a piece of one character is kept alone.
    assert_eq!(extract_keywords("我的猫"), vec!["猫"]);
    assert_eq!(extract_keywords("今天的金价"), vec!["今天", "金价"]);
    assert_eq!(extract_keywords("猫"), vec!["猫"]);
    assert_eq!(extract_keywords("API密钥"), vec!["api", "密钥"]);
}
