use super::*;

#[test]
fn simple_fields_quotes_and_flags() {
    let fm = parse_front_matter(
        "---\r\nname: pdf-tools\r\ndescription: \"Split & merge PDFs\"\r\ndisable-model-invocation: True\r\n---\r\n# Body\r\n",
    );
    assert_eq!(fm.get("name"), Some("pdf-tools"));
    assert_eq!(fm.get("description"), Some("Split & merge PDFs"));
    assert!(fm.flag("disable-model-invocation"));
    assert!(!fm.flag("missing"));
}

#[test]
fn folded_and_literal_blocks() {
    let fm = parse_front_matter(
        "---\nname: x\ndescription: >\n  Use when the user\n  asks for charts.\nnotes: |\n  one\n  two\n---\n",
    );
    assert_eq!(
        fm.get("description"),
        Some("Use when the user asks for charts.")
    );
    assert_eq!(fm.get("notes"), Some("one\ntwo"));
}

#[test]
fn no_front_matter_is_empty() {
    assert_eq!(
        parse_front_matter("# Just a heading\nname: no"),
        FrontMatter::default()
    );
    assert_eq!(parse_front_matter(""), FrontMatter::default());
}
