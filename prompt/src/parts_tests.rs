use super::*;

#[test]
fn empty_lines_are_dropped_and_join_newlines_end_their_part() {
    let tooling = PartKind::Section(Section::Tooling);
    let safety = PartKind::Section(Section::Safety);
    let mut lines = Lines::default();
    lines.push(&tooling, "## Tooling");
    lines.push(&tooling, "");
    lines.push(&tooling, "- read");
    lines.push(&safety, "## Safety");
    lines.push(&safety, "a\n\nb");
    let built = assemble(lines.into_pieces(), PromptMode::Full);
    assert_eq!(built.text, "## Tooling\n- read\n## Safety\na\n\nb");
    let parts: Vec<(String, &str)> = built.iter_parts().map(|(k, t)| (k.label(), t)).collect();
    assert_eq!(
        parts,
        [
            ("section:tooling".to_string(), "## Tooling\n- read\n"),
            ("section:safety".to_string(), "## Safety\na\n\nb"),
        ]
    );
}

#[test]
fn labels_name_files_and_special_parts() {
    assert_eq!(
        PartKind::ContextFile {
            name: "AGENTS.md".into()
        }
        .label(),
        "file:AGENTS.md"
    );
    assert_eq!(PartKind::CacheBoundary.label(), "cache-boundary");
}
