//! Exact mode: counts of known strings against the published token ids of tiktoken's
//! o200k_base and cl100k_base (the ids are the ones OpenAI's tiktoken and its cookbook give),
//! and exact counts of whole messages.
#![cfg(feature = "exact-tokens")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rampart_context::tokens::{CountMode, Encoding, IMAGE_TOKENS, TokenCounter};
use rampart_engine_api::AgentMessage;
use serde_json::json;

fn counter(encoding: Encoding) -> TokenCounter {
    TokenCounter::new(CountMode::Exact(encoding))
}

/// (text, o200k_base ids, cl100k_base ids)
const KNOWN: &[(&str, &[u32], &[u32])] = &[
    ("hello world", &[24912, 2375], &[15339, 1917]),
    (
        "tiktoken is great!",
        &[83, 8251, 2488, 382, 2212, 0],
        &[83, 1609, 5963, 374, 2294, 0],
    ),
    (
        "antidisestablishmentarianism",
        &[493, 129901, 376, 160388, 21203, 2367],
        &[519, 85342, 34500, 479, 8997, 2191],
    ),
    (
        "2 + 2 = 4",
        &[17, 659, 220, 17, 314, 220, 19],
        &[17, 489, 220, 17, 284, 220, 19],
    ),
    (
        "お誕生日おめでとう",
        &[8930, 9697, 243, 128225, 8930, 17693, 4344, 48669],
        &[33334, 45918, 243, 21990, 9080, 33334, 62004, 16556, 78699],
    ),
    (
        "上下文窗口是有限资源",
        &[176919, 4883, 165707, 3221, 35501, 22121],
        &[
            17905, 17297, 17161, 91739, 245, 40526, 21043, 19361, 48249, 86429,
        ],
    ),
    (
        "fn main() {\n    println!(\"hi\");\n}\n",
        &[13682, 2758, 416, 405, 271, 30266, 33966, 3686, 1171, 739],
        &[8998, 1925, 368, 341, 262, 14069, 17667, 6151, 803, 534],
    ),
    // Special-token text is ordinary text: seven tokens, not `<|endoftext|>`'s one.
    (
        "<|endoftext|>",
        &[27, 91, 419, 1440, 919, 91, 29],
        &[27, 91, 8862, 728, 428, 91, 29],
    ),
];

#[test]
fn known_strings_have_their_published_counts() {
    let o200k = counter(Encoding::O200kBase);
    let cl100k = counter(Encoding::Cl100kBase);
    assert!(o200k.is_exact() && cl100k.is_exact());
    for &(text, o_ids, c_ids) in KNOWN {
        assert_eq!(o200k.count_text(text), o_ids.len() as u64, "o200k {text:?}");
        assert_eq!(
            cl100k.count_text(text),
            c_ids.len() as u64,
            "cl100k {text:?}"
        );
    }
    assert_eq!(o200k.count_text(""), 0);
}

/// A mix of prose, code, JSON, CJK, accents, emoji and odd whitespace, long enough to hit
/// every branch of the pre-tokeniser's fast path and its fallback.
fn mixed_text() -> String {
    let mut text = String::new();
    for i in 0..200 {
        text.push_str("The build fails because the parser rejects a trailing comma; we'll retry. ");
        text.push_str(&format!("fn f{i}(x: &str) -> Result<u32, Error> {{\n    x.parse::<u32>().map_err(|e| e.into())\n}}\n"));
        text.push_str("{\"path\":\"/srv/app/src/lib.rs\",\"line\":42,\"ok\":true}\n");
        text.push_str("上下文窗口是有限资源。日本語のテキスト、한국어 문장도 있습니다。\n");
        text.push_str(
            "Café naïve résumé — ½ ² ٣ 😀 \u{A0}nbsp\u{3000}ideographic\t\ttabs   \r\n\n",
        );
        text.push_str("HTTPServer I'M DON'T it's they've 'll ſ\n");
    }
    text
}

#[test]
fn long_mixed_text_has_the_counts_bpe_openai_gave() {
    // Counted by the `bpe-openai` crate, which counted exactly before the vocabularies were
    // shipped compressed and merged here (`src/tokens/exact.rs`).
    let text = mixed_text();
    for (encoding, before) in [
        (Encoding::O200kBase, 24_200),
        (Encoding::Cl100kBase, 27_200),
    ] {
        assert_eq!(counter(encoding).count_text(&text), before, "{encoding:?}");
    }
}

#[test]
fn messages_count_their_parts() {
    let o200k = counter(Encoding::O200kBase);
    let t = |s: &str| o200k.count_text(s);

    let user = AgentMessage::user_text("hello world", 0);
    assert_eq!(o200k.count_message(&user), 2);

    let reply: AgentMessage = serde_json::from_value(json!({
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me read the file."},
            {"type": "text", "text": "Reading it now."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "/srv/app/src/lib.rs"}}
        ],
        "api": "openai-responses", "provider": "openai", "model": "gpt-4o",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 0
    }))
    .unwrap();
    let expected = t("Let me read the file.")
        + t("Reading it now.")
        + t("read")
        + t(r#"{"path":"/srv/app/src/lib.rs"}"#);
    assert_eq!(o200k.count_message(&reply), expected);

    let result: AgentMessage = serde_json::from_value(json!({
        "role": "toolResult", "toolCallId": "c1", "toolName": "read",
        "content": [
            {"type": "text", "text": "上下文窗口是有限资源"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        ],
        "isError": false, "timestamp": 0
    }))
    .unwrap();
    assert_eq!(o200k.count_message(&result), 6 + IMAGE_TOKENS);

    // The memoised path gives the same figures.
    let shared: Vec<_> = [user, reply, result].into_iter().map(Arc::new).collect();
    let report = o200k.count_messages(&shared);
    assert_eq!(report.per_message, vec![2, expected, 6 + IMAGE_TOKENS]);
    assert_eq!(report.total, 2 + expected + 6 + IMAGE_TOKENS);
}
