use super::*;

fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    for c in chunks {
        p.push(c, &mut out).unwrap();
    }
    out
}

fn data(e: &SseEvent) -> &str {
    std::str::from_utf8(&e.data).unwrap()
}

#[test]
fn parses_events_and_names() {
    let evs = parse_all(&[b"event: ping\ndata: {}\n\ndata: a\ndata: b\n\n"]);
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].event.as_deref(), Some("ping"));
    assert_eq!(data(&evs[1]), "a\nb");
}

#[test]
fn every_split_point_gives_the_same_events() {
    let text = b"data: {\"x\":1}\r\n\r\n: comment\n\ndata:no-space\r\rdata: last\n\n";
    let whole = parse_all(&[text]);
    assert_eq!(whole.len(), 3);
    assert_eq!(data(&whole[1]), "no-space");
    for i in 0..text.len() {
        for j in i..text.len() {
            let (a, rest) = text.split_at(i);
            let (b, c) = rest.split_at(j - i);
            assert_eq!(parse_all(&[a, b, c]), whole, "split at {i},{j}");
        }
    }
}

#[test]
fn an_event_is_emitted_only_at_its_blank_line() {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    p.push(b"data: partial", &mut out).unwrap();
    assert!(out.is_empty());
    p.push(b"\n", &mut out).unwrap();
    assert!(out.is_empty());
    p.push(b"\n", &mut out).unwrap();
    assert_eq!(out.len(), 1);
}

#[test]
fn comments_and_empty_events_emit_nothing() {
    assert!(parse_all(&[b": keep-alive\n\n\n\nevent: x\n\n"]).is_empty());
}

#[test]
fn frames_round_trip() {
    let f = frame(b"{\"a\":1}");
    let evs = parse_all(&[&f]);
    assert_eq!(data(&evs[0]), "{\"a\":1}");
    // An event of several lines stays one event of the same lines, not one line and noise.
    let f = frame(b"{\"choices\":\n[1]}\n");
    assert_eq!(&f[..], b"data: {\"choices\":\ndata: [1]}\ndata: \n\n");
    let evs = parse_all(&[&f]);
    assert_eq!(evs.len(), 1);
    assert_eq!(data(&evs[0]), "{\"choices\":\n[1]}\n");
}

#[test]
fn a_one_line_event_comes_framed_for_passing_on_without_a_copy() {
    let evs = parse_all(&[b"data:{\"a\":1}\r\n\r\ndata: x\ndata: y\n\n"]);
    assert_eq!(evs.len(), 2);
    let framed = evs[0].framed.as_ref().unwrap();
    assert_eq!(&framed[..], b"data: {\"a\":1}\n\n");
    // The data is a slice of the framed buffer: one allocation, no copy.
    assert_eq!(evs[0].data.as_ptr(), framed[6..].as_ptr());
    assert_eq!(frame(&evs[0].data), *framed);
    // Two data lines cannot be passed on as one: they are framed again by whoever sends them.
    assert_eq!(evs[1].framed, None);
    assert_eq!(data(&evs[1]), "x\ny");
}

#[test]
fn whole_events_are_slices_of_the_chunk_and_parse_as_the_copying_path_does() {
    let text: &[u8] =
        b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\nevent: x\ndata: c\n\ndata: d\r\n\r\ndata: e\n\ndata: [DONE]\n\n";
    let copied = parse_all(&[text]);
    assert_eq!(copied.len(), 6);
    for i in 0..text.len() {
        for j in i..text.len() {
            let mut p = SseParser::new();
            let mut out = Vec::new();
            for part in [&text[..i], &text[i..j], &text[j..]] {
                p.push_bytes(&Bytes::copy_from_slice(part), &mut out)
                    .unwrap();
            }
            assert_eq!(out, copied, "split at {i},{j}");
        }
    }
    // Unsplit, the first two events (and the last) point into the chunk: no copy.
    let chunk = Bytes::copy_from_slice(text);
    let mut p = SseParser::new();
    let mut out = Vec::new();
    p.push_bytes(&chunk, &mut out).unwrap();
    let inside = |b: &Bytes| {
        let range = chunk.as_ptr() as usize..chunk.as_ptr() as usize + chunk.len();
        range.contains(&(b.as_ptr() as usize))
    };
    assert!(inside(out[0].framed.as_ref().unwrap()) && inside(&out[1].data));
    assert_eq!(out[0].framed.as_deref(), Some(&b"data: {\"a\":1}\n\n"[..]));
    assert!(
        !inside(&out[2].data),
        "after an `event:` line the copying path takes over"
    );
}
