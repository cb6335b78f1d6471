//! Which characters are CJK (Han, Kana, Hangul and their punctuation and compatibility
//! forms).
//!
//! They matter three times: a CJK character is about one token rather than a quarter of one
//! (chunk budgets weigh it 4), CJK text has no spaces between words (the keyword index gets
//! one token per character, see `fts_query`), and MMR compares CJK text by characters and
//! character pairs.

/// Whether `c` is a CJK, Kana or Hangul character.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF     // Hangul Jamo
        | 0x2E80..=0x2FDF   // CJK radicals, Kangxi radicals
        | 0x2FF0..=0x2FFF   // ideographic description characters
        | 0x3000..=0x303F   // CJK symbols and punctuation
        | 0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3100..=0x312F   // Bopomofo
        | 0x3130..=0x318F   // Hangul compatibility Jamo
        | 0x3190..=0x31FF   // Kanbun, Bopomofo extended, strokes, Katakana extensions
        | 0x3200..=0x33FF   // enclosed CJK, compatibility
        | 0x3400..=0x4DBF   // CJK extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xA960..=0xA97F   // Hangul Jamo extended A
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xD7B0..=0xD7FF   // Hangul Jamo extended B
        | 0xF900..=0xFAFF   // CJK compatibility ideographs
        | 0xFE30..=0xFE4F   // CJK compatibility forms
        | 0xFF00..=0xFFEF   // half- and full-width forms
        | 0x1B000..=0x1B16F // Kana supplement and extended
        | 0x20000..=0x2FA1F // CJK extensions B–F, compatibility supplement
        | 0x30000..=0x323AF // CJK extensions G–H
    )
}

/// Whether `c` is a CJK letter that words are made of (not punctuation or a full-width Latin
/// form): these are the characters the keyword index splits one by one.
pub fn is_cjk_letter(c: char) -> bool {
    is_cjk(c) && c.is_alphanumeric() && !c.is_ascii() && !is_fullwidth_latin(c)
}

fn is_fullwidth_latin(c: char) -> bool {
    // Full-width digits and letters are words of their own, like their ASCII forms.
    matches!(c as u32, 0xFF10..=0xFF19 | 0xFF21..=0xFF3A | 0xFF41..=0xFF5A)
}

/// A chunk budget's weight of `text`: UTF-16 units, with every CJK character counted as 4
/// (about one token each, where Latin text is about 4 characters a token).
pub fn weighted_len(text: &str) -> usize {
    text.chars()
        .map(|c| if is_cjk(c) { 4 } else { c.len_utf16() })
        .sum()
}
