use super::*;

fn tools(names: &[&str]) -> Vec<ToolInfo> {
    names.iter().map(|n| ToolInfo::named(*n)).collect()
}

#[test]
fn both_tools_search_then_get() {
    let lines = memory_recall_lines(
        &tools(&["memory_search", "memory_get"]),
        CitationsMode::Auto,
    );
    assert_eq!(lines[0], "## Memory Recall");
    assert!(lines[1].contains("run memory_search"));
    assert!(lines[1].contains("use memory_get"));
    assert_eq!(
        lines[2],
        "Citations: include Source: <path#line> when it helps the user verify memory snippets."
    );
}

#[test]
fn search_only_and_get_only_variants() {
    let search = memory_recall_lines(&tools(&["Memory_Search"]), CitationsMode::On);
    assert!(search[1].contains("run Memory_Search"));
    assert!(!search[1].contains("memory_get"));
    let get = memory_recall_lines(&tools(&["memory_get"]), CitationsMode::On);
    assert!(get[1].contains("with memory_get"));
    assert!(!get[1].contains("memory_search"));
}

#[test]
fn citations_off_forbids_paths_in_replies() {
    let lines = memory_recall_lines(&tools(&["memory_search"]), CitationsMode::Off);
    assert_eq!(
        lines[2],
        "Citations are disabled: do not mention file paths or line numbers in replies unless \
         the user explicitly asks."
    );
}

#[test]
fn no_memory_tool_no_section() {
    assert!(memory_recall_lines(&tools(&["read"]), CitationsMode::On).is_empty());
}
