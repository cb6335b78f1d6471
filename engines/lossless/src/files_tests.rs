//! §8.18: large `<file>` blocks in user messages go aside; small ones stay inline.
use rampart_engine_api::AgentMessage;

use super::*;

fn csv(rows: usize) -> String {
    let mut out = String::from("id,name,score\n");
    for i in 0..rows {
        out.push_str(&format!("{i},name-{i},{}.5\n", i % 97));
    }
    out
}

fn user(text: String) -> AgentMessage {
    AgentMessage::user_text(text, 1_700_000_000_000)
}

fn sent_text(message: &AgentMessage) -> String {
    crate::conv::flat_text(message)
}

#[test]
fn a_30k_token_file_is_sent_as_a_reference_with_an_outline() {
    let body = csv(10_000);
    assert!(text_tokens(&body) > 30_000);
    let message = user(format!(
        "Here is the data:\n<file name=\"x.csv\">\n{body}</file>\nWhat is the top score?"
    ));
    let (sent, blocks) = referenced(&message, 7, 25_000).expect("replaced");
    assert_eq!(blocks.len(), 1);
    let block = &blocks[0];
    assert_eq!(
        (block.name.as_str(), block.mime.as_str()),
        ("x.csv", "text/csv")
    );
    assert_eq!(block.content, body.trim_end_matches('\n'));
    assert!(
        block.id.starts_with("file_") && block.id.len() == 5 + 16,
        "{}",
        block.id
    );
    let text = sent_text(&sent);
    assert!(
        text.contains(&format!(
            "[LCM File: {} | x.csv | text/csv | {} bytes]",
            block.id,
            block.content.len()
        )),
        "{text}"
    );
    assert!(
        text.contains("Table of 3 columns and 10000 rows; header: id,name,score"),
        "{text}"
    );
    assert!(text.starts_with("Here is the data:\n") && text.ends_with("What is the top score?"));
    assert!(
        text_tokens(&text) < 1_000,
        "the bytes stay out: {} tokens",
        text_tokens(&text)
    );
    // The same file in the same conversation always gets the same id; another conversation
    // gets its own.
    assert_eq!(referenced(&message, 7, 25_000).unwrap().1[0].id, block.id);
    assert_ne!(referenced(&message, 8, 25_000).unwrap().1[0].id, block.id);
}

#[test]
fn a_10k_token_file_stays_inline_and_near_misses_are_not_tags() {
    let small = user(format!("<file name='y.csv'>\n{}</file>", csv(3_000)));
    assert!(text_tokens(&sent_text(&small)) > 8_000);
    assert!(referenced(&small, 1, 25_000).is_none());
    let not_a_tag = user(format!("<filename>{}</file>", "x".repeat(200_000)));
    assert!(referenced(&not_a_tag, 1, 25_000).is_none());
    let unclosed = user(format!("<file name=\"z\">{}", "x".repeat(200_000)));
    assert!(referenced(&unclosed, 1, 25_000).is_none(), "kept as it is");
}

#[test]
fn json_outlines_name_their_keys_and_other_files_their_ends() {
    let json = format!(r#"{{"alpha": 1, "beta": [{}0]}}"#, "1,".repeat(60_000));
    let outline_text = outline(&json, "application/json");
    assert!(
        outline_text.contains("Top-level keys: alpha, beta."),
        "{outline_text}"
    );
    let prose = format!("START {} FINISH", "word ".repeat(50_000));
    let outline_text = outline(&prose, "text/plain");
    assert!(outline_text.contains("Begins: START"), "{outline_text}");
    assert!(outline_text.ends_with("FINISH"), "{outline_text}");
}
