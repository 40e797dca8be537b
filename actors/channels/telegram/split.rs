//! Splitting a long text into Telegram messages.
//!
//! `sendMessage` takes at most 4,096 characters as Telegram counts them: UTF-16 code units.
//! A longer text is sent as several messages, cut at a paragraph break when there is one in the
//! second half of the window, else at a line break, else at a space, else at the last whole
//! character that fits — never inside a character, so never between the two halves of a UTF-16
//! surrogate pair (an emoji).

/// The most UTF-16 code units one Telegram message may hold.
pub(crate) const MAX_MESSAGE_UTF16: usize = 4096;

/// The text's length as Telegram counts it.
pub(crate) fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Splits `text` into parts of at most `max` UTF-16 units each (`max` ≥ 2, so an emoji fits),
/// in order; the whitespace at a cut is dropped. An empty text gives no parts.
pub(crate) fn split(text: &str, max: usize) -> Vec<String> {
    let max = max.max(2);
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if utf16_len(rest) <= max {
            parts.push(rest.to_string());
            break;
        }
        let window = fitting_prefix(rest, max);
        let cut = soft_cut(&rest[..window], max).unwrap_or(window);
        let part = rest[..cut].trim_end();
        if !part.is_empty() {
            parts.push(part.to_string());
        }
        rest = rest[cut..].trim_start();
    }
    parts
}

/// The byte length of the longest prefix of whole characters within `max` UTF-16 units.
fn fitting_prefix(text: &str, max: usize) -> usize {
    let mut units = 0;
    for (i, c) in text.char_indices() {
        units += c.len_utf16();
        if units > max {
            return i;
        }
    }
    text.len()
}

/// Where to cut `window` (a byte offset after the separator): the last paragraph break, line
/// break or space that leaves a part of at least half of `max`.
fn soft_cut(window: &str, max: usize) -> Option<usize> {
    let long_enough = |at: usize| utf16_len(&window[..at]) >= max / 2;
    ["\n\n", "\n", " "].iter().find_map(|sep| {
        window
            .rfind(sep)
            .map(|at| at + sep.len())
            .filter(|&at| long_enough(at))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn a_short_text_is_one_part_and_an_empty_one_none() {
        assert_eq!(split("hello", MAX_MESSAGE_UTF16), ["hello"]);
        assert!(split("  \n ", MAX_MESSAGE_UTF16).is_empty());
    }

    #[test]
    fn a_long_text_is_cut_at_paragraphs_and_keeps_every_word() {
        let para = "word ".repeat(500); // 2,500 units
        let text = format!("{para}\n\n{para}\n\n{para}");
        let parts = split(&text, MAX_MESSAGE_UTF16);
        assert_eq!(parts.len(), 3, "one paragraph a part");
        assert!(parts.iter().all(|p| utf16_len(p) <= MAX_MESSAGE_UTF16));
        assert_eq!(words(&parts.join(" ")), words(&text));
    }

    #[test]
    fn a_text_without_breaks_is_cut_hard_at_the_limit() {
        let text = "x".repeat(10_000);
        let parts = split(&text, MAX_MESSAGE_UTF16);
        let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        assert_eq!(lens, [4096, 4096, 1808]);
    }

    #[test]
    fn a_surrogate_pair_is_never_cut_in_two() {
        // "a" then emoji (2 UTF-16 units each): the limit falls inside the 4th emoji's pair.
        let text = format!("a{}", "😀".repeat(10));
        let parts = split(&text, 8);
        assert!(parts.iter().all(|p| utf16_len(p) <= 8), "{parts:?}");
        assert_eq!(parts.concat(), text, "every character kept whole");
        assert_eq!(parts[0], "a😀😀😀");
    }

    #[test]
    fn a_line_break_is_used_when_there_is_no_paragraph() {
        let line = "y".repeat(3000);
        let text = format!("{line}\n{line}");
        assert_eq!(split(&text, MAX_MESSAGE_UTF16), [line.clone(), line]);
    }
}
