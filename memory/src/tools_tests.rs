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

/// A provider's URL is not its answer: a loopback provider on a port holding the digits 429
/// (`34291`) that refuses with a 400 gets the generic pair, not the quota one (this made
/// `embedders::memory_search_reports_case_20_failures_through_the_tool` fail whenever the
/// test's server drew such a port). A 429 said in words is still a quota.
#[test]
fn case_20_a_port_holding_429_is_no_quota() {
    let refused = MemoryError::from(EmbedError::Http {
        provider: "openai".into(),
        url: "http://127.0.0.1:34291/v1/embeddings".into(),
        status: 400,
        message: "model not found".into(),
    });
    assert_eq!(search_failure(&refused)["warning"], json!(GENERIC_WARNING));
    for text in [
        "HTTP 429",
        "status 429: slow down",
        "429 Too Many Requests",
        "(429)",
    ] {
        assert!(crate::embed::text_mentions_quota(text), "{text}");
    }
    for text in ["port 34291", "4290 items", "v1/embeddings?id=14293"] {
        assert!(!crate::embed::text_mentions_quota(text), "{text}");
    }
}
