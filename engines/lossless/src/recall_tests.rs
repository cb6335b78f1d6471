//! Folding: what counts as a value, and what keeps two texts apart.
use super::*;

#[test]
fn values_are_runs_with_a_digit_less_their_closing_punctuation() {
    let (shape_of, values) =
        shape("restart at 2026-02-11T15:59:17.060Z, ts 1770825425171. v11.9.0 ok: id-7");
    assert_eq!(
        values,
        vec![
            "2026-02-11T15:59:17.060Z",
            "1770825425171",
            "v11.9.0",
            "id-7"
        ]
    );
    assert_eq!(shape_of, "restart at \u{1}, ts \u{1}. \u{1} ok: \u{1}");
}

#[test]
fn words_keep_texts_apart_and_values_do_not() {
    assert_eq!(shape("status ok 12").0, shape("status ok 13").0);
    assert_ne!(shape("status ok 12").0, shape("status failed 12").0);
    // A UUID is one value, its letter-only groups included.
    assert_eq!(shape("3c46f87b-dddc-4bc3-b6e3-a928d5420001").1.len(), 1);
    // Text around non-ASCII characters is copied whole.
    assert_eq!(shape("重启 7 次").0, "重启 \u{1} 次");
}
