use super::*;
use crate::embed::EmbedError;

#[test]
fn case_23_citations() {
    let c = citation("memory/x.md", 3, 7);
    assert_eq!(
        with_citation(" foo ", &c),
        "foo\n\nSource: memory/x.md#L3-L7"
    );
    assert_eq!(citation("memory/x.md", 3, 3), "memory/x.md#L3");
}

#[test]
fn case_20_quota_errors_get_the_quota_pair() {
    let quota = MemoryError::from(EmbedError::Other {
        provider: "openai".into(),
        message: "HTTP 429 insufficient_quota".into(),
    });
    let v = search_failure(&quota);
    assert_eq!(v["results"], json!([]));
    assert_eq!(v["disabled"], json!(true));
    assert_eq!(v["unavailable"], json!(true));
    assert_eq!(v["warning"], json!(QUOTA_WARNING));
    assert_eq!(v["action"], json!(QUOTA_ACTION));
    assert!(v["error"].as_str().unwrap().contains("insufficient_quota"));

    let typed = MemoryError::from(EmbedError::Quota {
        provider: "openai".into(),
        url: "http://x/embeddings".into(),
        status: 429,
        message: "Rate limit reached".into(),
    });
    assert_eq!(search_failure(&typed)["warning"], json!(QUOTA_WARNING));
}

#[test]
fn case_20_other_errors_get_the_generic_pair() {
    let timeout = MemoryError::from(EmbedError::Other {
        provider: "openai".into(),
        message: "embedding provider timeout".into(),
    });
    let v = search_failure(&timeout);
    assert_eq!(v["disabled"], json!(true));
    assert_eq!(v["unavailable"], json!(true));
    assert_eq!(v["warning"], json!(GENERIC_WARNING));
    assert_eq!(v["action"], json!(GENERIC_ACTION));
    assert!(v["error"].as_str().unwrap().contains("timeout"));
}

#[test]
fn schemas_name_their_required_parameters() {
    assert_eq!(memory_search_schema()["required"], json!(["query"]));
    assert_eq!(memory_get_schema()["required"], json!(["path"]));
    let names: Vec<String> = tool_definitions()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, vec![MEMORY_SEARCH, MEMORY_GET]);
    for tool in tool_definitions() {
        assert_eq!(tool["parameters"]["type"], json!("object"));
        assert!(!tool["description"].as_str().unwrap().is_empty());
    }
}

#[test]
fn numbers_come_as_numbers_or_numeric_strings() {
    let args = json!({"a": 3.7, "b": "5", "c": "x", "d": -2});
    assert_eq!(whole(&args, "a"), Some(3));
    assert_eq!(whole(&args, "b"), Some(5));
    assert_eq!(whole(&args, "c"), None);
    assert_eq!(whole(&args, "d"), Some(0));
    assert_eq!(whole(&args, "missing"), None);
}
