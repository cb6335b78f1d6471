#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

fn block(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

#[test]
fn a_string_content_without_is_error_is_recorded_and_read_back() {
    let form = AnthropicToolResultForm::of_block(&block(
        json!({"type": "tool_result", "tool_use_id": "t", "content": "ok"}),
    ));
    assert_eq!(
        form,
        AnthropicToolResultForm {
            content_string: true,
            is_error_omitted: true
        }
    );
    let mut extra = Extra::new();
    form.record(&mut extra);
    assert_eq!(
        extra[ANTHROPIC_FORM_KEY],
        json!({"contentString": true, "isErrorOmitted": true})
    );
    assert_eq!(AnthropicToolResultForm::read(&extra), form);
}

#[test]
fn the_default_form_records_nothing() {
    let form = AnthropicToolResultForm::of_block(&block(json!({
        "type": "tool_result", "tool_use_id": "t", "is_error": false,
        "content": [{"type": "text", "text": "ok"}]
    })));
    assert_eq!(form, AnthropicToolResultForm::default());
    let mut extra = Extra::new();
    form.record(&mut extra);
    assert!(extra.is_empty());
    assert_eq!(
        AnthropicToolResultForm::read(&extra),
        AnthropicToolResultForm::default()
    );
}
