use super::*;

fn names(tools: &[&str]) -> Vec<ToolInfo> {
    tools.iter().map(|n| ToolInfo::named(*n)).collect()
}

#[test]
fn core_tools_come_first_in_reference_order_then_the_rest_alphabetically() {
    let lines = tool_lines(&names(&[
        "memory_search",
        "exec",
        "Zeta",
        "read",
        "alpha",
        "session_status",
    ]));
    assert_eq!(
        lines,
        [
            "- read: Read file contents",
            "- exec: Run a shell command (long ones can run in the background)",
            "- session_status: Show this session's status, including the current date and time",
            "- alpha",
            "- memory_search",
            "- Zeta",
        ]
    );
}

#[test]
fn names_are_deduplicated_without_regard_to_case_keeping_the_first_spelling() {
    let lines = tool_lines(&[
        ToolInfo::named("Read"),
        ToolInfo::named("READ"),
        ToolInfo::with_summary("custom", "Does a thing"),
        ToolInfo::named("Custom"),
    ]);
    assert_eq!(
        lines,
        ["- Read: Read file contents", "- custom: Does a thing"]
    );
}

#[test]
fn a_callers_summary_wins_over_the_built_in_one() {
    let lines = tool_lines(&[ToolInfo::with_summary("read", "Read a file, paged")]);
    assert_eq!(lines, ["- read: Read a file, paged"]);
}

#[test]
fn no_tools_say_so_instead_of_naming_tools_that_do_not_exist() {
    let lines = tool_lines(&[]);
    assert_eq!(lines, [NO_TOOLS_LINE]);
    assert!(!lines.iter().any(|l| l.starts_with("- exec")));
    // Blank names do not count as tools.
    assert_eq!(tool_lines(&names(&["  "])), lines);
}

#[test]
fn a_tool_is_found_in_the_callers_spelling() {
    let tools = names(&["Read", "Exec"]);
    assert_eq!(find_tool(&tools, "read"), Some("Read"));
    assert_eq!(find_tool(&tools, "write"), None);
}
