//! Property tests of `truncate_tool_result_text`: the output is bounded, and is made only of a
//! prefix of the original, optionally the middle marker and a suffix of the original, and the
//! notice with the exact omitted count.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use rampart_context::guards::tool_result::{
    MIDDLE_OMISSION_MARKER, NOTICE_SEPARATOR, TruncateOptions, format_truncation_notice_with_ref,
    truncate_tool_result_text,
};

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Text with lines, multibyte characters and, sometimes, an ending that counts as important.
fn text_strategy() -> impl Strategy<Value = String> {
    let body = prop::collection::vec(
        prop_oneof![
            4 => "[a-z ]{1,40}",
            2 => Just("\n".to_owned()),
            1 => "[äöü日本語🎉]{1,10}",
            1 => Just("{\"k\": [1, 2]}".to_owned()),
        ],
        0..400,
    )
    .prop_map(|parts| parts.concat());
    let ending = prop_oneof![
        Just(String::new()),
        Just("\nerror: it broke".to_owned()),
        Just("\nTOTAL: 3 done".to_owned()),
        Just("}".to_owned()),
    ];
    (body, ending).prop_map(|(b, e)| b + &e)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn output_is_bounded_and_made_of_the_original(
        text in text_strategy(),
        max_chars in 0usize..8_000,
        min_keep in prop_oneof![Just(0usize), Just(50usize), Just(2_000usize)],
        with_ref in any::<bool>(),
    ) {
        let full_ref = with_ref.then_some("blob sha256:0f");
        let opts = TruncateOptions { min_keep_chars: min_keep, full_output_ref: full_ref };
        let cut = truncate_tool_result_text(&text, max_chars, &opts);
        let total = chars(&text);
        if !cut.is_truncated() {
            prop_assert_eq!(cut.text.as_ref(), text.as_str());
            prop_assert!(total <= max_chars.max(min_keep));
            return Ok(());
        }
        // Bound: max(budget, min_keep) plus the separator and the notice for the whole text.
        let reserve = NOTICE_SEPARATOR.len() + chars(&format_truncation_notice_with_ref(total, full_ref));
        let budget = min_keep.max(max_chars.saturating_sub(reserve));
        prop_assert!(chars(&cut.text) <= budget + reserve,
            "{} > {} + {}", chars(&cut.text), budget, reserve);

        // Shape: head [+ marker + tail] + separator + notice(omitted).
        let notice = format_truncation_notice_with_ref(cut.omitted_chars, full_ref);
        let expected_end = format!("{NOTICE_SEPARATOR}{notice}");
        prop_assert!(cut.text.ends_with(&expected_end));
        let body = &cut.text[..cut.text.len() - expected_end.len()];
        let (head, tail) = match body.split_once(MIDDLE_OMISSION_MARKER) {
            Some((h, t)) => (h, t),
            None => (body, ""),
        };
        prop_assert!(text.starts_with(head));
        prop_assert!(text.ends_with(tail));
        prop_assert!(head.len() + tail.len() <= text.len());
        prop_assert_eq!(cut.omitted_chars, total - chars(head) - chars(tail));
        prop_assert!(cut.omitted_chars > 0);
    }
}
