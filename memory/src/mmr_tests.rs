use super::*;

fn set(words: &[&str]) -> HashSet<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn mmr_score_matches_the_reference_cases() {
    assert!((mmr_score(1.0, 0.5, 0.7) - 0.55).abs() < 1e-12);
    assert!((mmr_score(0.8, 0.6, 0.5) - 0.1).abs() < 1e-12);
}

#[test]
fn jaccard_edge_cases() {
    assert_eq!(jaccard(&set(&[]), &set(&[])), 1.0);
    assert_eq!(jaccard(&set(&["a"]), &set(&[])), 0.0);
    assert_eq!(jaccard(&set(&["a", "b"]), &set(&["b", "c"])), 1.0 / 3.0);
}

#[test]
fn tokens_are_ascii_words_and_cjk_unigrams_and_bigrams() {
    assert_eq!(mmr_tokens("Hello, World_1!"), set(&["hello", "world_1"]));
    assert_eq!(
        mmr_tokens("金银价"),
        set(&["金", "银", "价", "金银", "银价"])
    );
    assert_eq!(mmr_tokens("x 猫 y"), set(&["x", "猫", "y"]));
}

#[test]
fn lambda_zero_picks_the_most_different_next() {
    let items = vec![
        (1, 1.0, "apple banana cherry"),
        (2, 0.9, "apple banana date"),
        (3, 0.8, "elderberry fig grape"),
    ];
    let order: Vec<i32> = mmr_rerank(items, 0.0, |i| i.1, |i| i.2)
        .into_iter()
        .map(|i| i.0)
        .collect();
    assert_eq!(&order[..2], &[1, 3]);
    assert_eq!(order, vec![1, 3, 2]);
}

#[test]
fn lambda_one_is_a_plain_sort() {
    let items = vec![(1, 0.2, "a"), (2, 0.9, "a"), (3, 0.5, "a")];
    let order: Vec<i32> = mmr_rerank(items, 1.0, |i| i.1, |i| i.2)
        .into_iter()
        .map(|i| i.0)
        .collect();
    assert_eq!(order, vec![2, 3, 1]);
}

#[test]
fn duplicates_are_pushed_down_at_the_default_lambda() {
    let items = vec![
        (1, 1.0, "deploy the api on friday with blue green"),
        (2, 0.95, "deploy the api on friday with blue green"),
        (3, 0.6, "the cat likes tuna"),
    ];
    let order: Vec<i32> = mmr_rerank(items, 0.5, |i| i.1, |i| i.2)
        .into_iter()
        .map(|i| i.0)
        .collect();
    assert_eq!(order, vec![1, 3, 2]);
}
