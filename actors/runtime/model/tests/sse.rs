use crate::model::sse::{SseEvent, SseParser};

fn data(s: &str) -> SseEvent {
    SseEvent {
        event: None,
        data: s.to_owned(),
    }
}

fn feed_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = input.chunks(piece).flat_map(|c| parser.push(c)).collect();
    events.extend(parser.finish());
    events
}

const STREAM: &str = ": keep-alive comment\r\n\
    data: {\"a\":1}\r\n\
    \r\n\
    event: delta\n\
    data: first line\n\
    data:second line\n\
    \n\
    data: héllo wörld\r\r\
    data: [DONE]\n\n";

#[test]
fn events_are_the_same_whatever_the_chunk_boundaries() {
    let expected = vec![
        data("{\"a\":1}"),
        SseEvent {
            event: Some("delta".into()),
            data: "first line\nsecond line".into(),
        },
        data("héllo wörld"),
        data("[DONE]"),
    ];
    for piece in [1, 2, 3, 5, 7, 64, STREAM.len()] {
        assert_eq!(
            feed_in_pieces(STREAM.as_bytes(), piece),
            expected,
            "chunks of {piece} bytes"
        );
    }
}

#[test]
fn crlf_split_between_chunks_is_one_line_end() {
    let mut parser = SseParser::new();
    assert!(parser.push(b"data: a\r").is_empty());
    // If the `\n` were taken for a blank line, "a" would be dispatched alone here.
    assert!(parser.push(b"\ndata: b\r").is_empty());
    assert_eq!(parser.push(b"\n\r\n"), vec![data("a\nb")]);
}

#[test]
fn line_split_mid_field_and_mid_character_is_joined() {
    let mut parser = SseParser::new();
    let bytes = "data: {\"content\":\"é\"}\n\n".as_bytes();
    let cut = bytes.iter().position(|&b| b >= 0x80).unwrap() + 1; // inside the 2-byte 'é'
    assert!(parser.push(&bytes[..3]).is_empty());
    assert!(parser.push(&bytes[3..cut]).is_empty());
    assert_eq!(
        parser.push(&bytes[cut..]),
        vec![data("{\"content\":\"é\"}")]
    );
}

#[test]
fn blank_lines_without_data_and_comments_dispatch_nothing() {
    let mut parser = SseParser::new();
    assert!(
        parser
            .push(b"\n\n: ping\n\nid: 7\nretry: 10\n\n")
            .is_empty()
    );
    assert!(parser.finish().is_none());
}

#[test]
fn finish_dispatches_an_event_whose_blank_line_never_came() {
    let mut parser = SseParser::new();
    assert_eq!(parser.push(b"data: one\n\ndata: two"), vec![data("one")]);
    assert_eq!(parser.finish(), Some(data("two")));
    assert_eq!(parser.finish(), None, "nothing is dispatched twice");
}

#[test]
fn data_field_without_colon_is_an_empty_line() {
    let events = feed_in_pieces(b"data\ndata: x\n\n", 4);
    assert_eq!(events, vec![data("\nx")]);
}

#[test]
fn a_limited_parser_refuses_a_line_without_end_and_an_event_without_blank_line() {
    use crate::model::sse::SseTooLarge;
    // One line that never ends, fed in small pieces.
    let mut parser = SseParser::with_limit(100);
    assert_eq!(parser.try_push(b"data: "), Ok(vec![]));
    let err = (0..20)
        .map(|_| parser.try_push(&[b'x'; 10]))
        .find_map(Result::err);
    assert_eq!(err, Some(SseTooLarge::Line(100)));

    // `data:` lines, each short, with no blank line between them.
    let mut parser = SseParser::with_limit(100);
    let err = (0..20)
        .map(|_| parser.try_push(b"data: xxxxxxxxxx\n"))
        .find_map(Result::err);
    assert_eq!(err, Some(SseTooLarge::Event(100)));
    assert!(err.unwrap().to_string().contains("100 bytes"));

    // Under the limit, events of any number pass: the limit is per line and per event.
    let mut parser = SseParser::with_limit(100);
    for _ in 0..50 {
        assert_eq!(
            parser.try_push(b"data: xxxxxxxxxx\n\n"),
            Ok(vec![data("xxxxxxxxxx")])
        );
    }
    // The last, unterminated line counts at the end too.
    let mut parser = SseParser::with_limit(20);
    assert_eq!(
        parser.try_push(
            b"data: 1234567890
data: 123456789"
        ),
        Ok(vec![])
    );
    assert_eq!(parser.try_finish(), Err(SseTooLarge::Event(20)));
}
