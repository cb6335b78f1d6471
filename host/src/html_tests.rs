use super::*;

#[test]
fn markup_in_text_is_escaped_for_html_and_xml() {
    assert_eq!(
        escape("<script>alert('x')</script> & \"q\""),
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
    );
}

#[test]
fn a_path_segment_cannot_leave_its_segment() {
    assert_eq!(path_segment("0b9c-11ef_a.b~"), "0b9c-11ef_a.b~");
    assert_eq!(path_segment("../x/y?z#w"), "..%2Fx%2Fy%3Fz%23w");
    assert_eq!(path_segment(".."), "%2E%2E");
    assert_eq!(path_segment("é"), "%C3%A9");
    assert_eq!(path_segment("<a>"), "%3Ca%3E");
}

#[test]
fn a_preview_is_one_line_and_cut_with_an_ellipsis() {
    assert_eq!(preview("a\n\n  b\tc", 10), "a b c");
    assert_eq!(preview("abcdef ghi", 4), "abcd…");
    assert_eq!(preview("ab cd", 2), "ab…");
    assert_eq!(preview("", 5), "");
}
