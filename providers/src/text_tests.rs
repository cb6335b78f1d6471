use rampart_prompt::CACHE_BOUNDARY;

use super::*;

#[test]
fn a_prompt_without_the_marker_is_sent_as_it_is() {
    let system = wire_system("You are careful.\n## Runtime");
    assert_eq!(system.text(), "You are careful.\n## Runtime");
    assert_eq!(system.blocks(), ["You are careful.\n## Runtime"]);
}

#[test]
fn the_marker_is_stripped_from_one_text_and_splits_the_blocks() {
    let raw = format!("Stable part.\n## Workspace{CACHE_BOUNDARY}## Runtime\nRuntime: x");
    let system = wire_system(&raw);
    let text = system.text();
    assert!(!text.contains("RAMPART_CACHE_BOUNDARY"), "{text}");
    assert_eq!(text, "Stable part.\n## Workspace\n## Runtime\nRuntime: x");
    assert_eq!(
        system.blocks(),
        ["Stable part.\n## Workspace", "## Runtime\nRuntime: x"]
    );
}

#[test]
fn a_blank_half_is_not_a_block_of_its_own() {
    let raw = format!("Only a prefix.{CACHE_BOUNDARY}  \n");
    let blocks = wire_system(&raw).blocks();
    assert_eq!(blocks.len(), 1);
    assert!(!blocks[0].contains("RAMPART_CACHE_BOUNDARY"));
    assert!(blocks[0].starts_with("Only a prefix."));
}
