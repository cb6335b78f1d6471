use super::*;

#[test]
fn split_and_strip() {
    let text = format!("Stable\n{CACHE_BOUNDARY}\nDynamic");
    assert_eq!(split_at_cache_boundary(&text), Some(("Stable", "Dynamic")));
    assert_eq!(split_at_cache_boundary("no marker"), None);
    assert_eq!(strip_cache_boundary(&text), "Stable\n\n\nDynamic");
}

#[test]
fn an_empty_addition_changes_nothing() {
    let text = format!("Stable{CACHE_BOUNDARY}Dynamic  ");
    assert_eq!(insert_addition(&text, " \r\n\t"), text);
}

#[test]
fn without_a_marker_the_addition_goes_first() {
    assert_eq!(insert_addition("Prompt", "Added \r\n"), "Added\n\nPrompt");
}

#[test]
fn markers_inside_the_addition_are_removed() {
    let added = insert_addition(
        &format!("A{CACHE_BOUNDARY}B"),
        &format!("x{CACHE_BOUNDARY}y <!-- RAMPART_CACHE_BOUNDARY --> z"),
    );
    assert_eq!(added.matches("RAMPART_CACHE_BOUNDARY").count(), 1);
    assert_eq!(added, format!("A{CACHE_BOUNDARY}x\ny  z\n\nB"));
}

#[test]
fn with_nothing_after_the_marker_the_addition_ends_the_prompt() {
    assert_eq!(
        insert_addition(&format!("A \n{CACHE_BOUNDARY}\n  \n"), "x"),
        format!("A{CACHE_BOUNDARY}x")
    );
}
