use super::*;
use k8s_openapi::api::core::v1::ConfigMap;

fn added(name: &str) -> String {
    format!(
        r#"{{"type":"ADDED","object":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","resourceVersion":"7"}}}}}}"#
    )
}

fn frames(
    parts: Vec<kube::Result<Bytes>>,
) -> Reader<futures::stream::Iter<std::vec::IntoIter<kube::Result<Bytes>>>> {
    Reader {
        body: futures::stream::iter(parts),
        rest: Bytes::new(),
        partial: Vec::new(),
        ended: false,
    }
}

fn ok(text: &str) -> kube::Result<Bytes> {
    Ok(Bytes::from(text.to_owned()))
}

fn name(event: Option<kube::Result<WatchEvent<ConfigMap>>>) -> String {
    match event {
        Some(Ok(WatchEvent::Added(cm))) => cm.metadata.name.unwrap_or_default(),
        other => panic!("expected an ADDED event, got {other:?}"),
    }
}

#[tokio::test]
async fn events_whole_split_and_several_in_a_frame_are_decoded_in_order() {
    let (a, b, c) = (added("a"), added("b"), added("c"));
    let (b1, b2) = b.split_at(20);
    let mut reader = frames(vec![
        ok(&format!("{a}\n{b1}")),
        ok(b2),
        ok(&format!("\n{c}\n")),
    ]);
    assert_eq!(name(reader.next().await), "a");
    assert_eq!(name(reader.next().await), "b");
    // The line split across frames was given back once decoded.
    assert_eq!(reader.partial.capacity(), 0);
    assert_eq!(name(reader.next().await), "c");
    assert!(reader.next::<ConfigMap>().await.is_none());
    assert!(reader.rest.is_empty() && reader.partial.capacity() == 0);
}

#[tokio::test]
async fn empty_lines_are_skipped_and_a_last_line_without_newline_is_read() {
    let text = format!("\n\n{}\n\n{}", added("a"), added("b"));
    let mut reader = frames(vec![ok(&text)]);
    assert_eq!(name(reader.next().await), "a");
    assert_eq!(name(reader.next().await), "b");
    assert!(reader.next::<ConfigMap>().await.is_none());
}

#[tokio::test]
async fn a_last_line_cut_mid_object_is_no_event() {
    let text = format!("{}\n{{\"type\":\"ADD", added("a"));
    let mut reader = frames(vec![ok(&text)]);
    assert_eq!(name(reader.next().await), "a");
    assert!(reader.next::<ConfigMap>().await.is_none());
}

#[tokio::test]
async fn a_status_line_is_an_api_error_and_garbage_a_decoding_error() {
    let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}"#;
    let mut reader = frames(vec![ok(&format!("{status}\nnot json\n"))]);
    match reader.next::<ConfigMap>().await {
        Some(Err(Error::Api(s))) => assert_eq!(s.code, 410),
        other => panic!("expected the Status, got {other:?}"),
    }
    assert!(matches!(
        reader.next::<ConfigMap>().await,
        Some(Err(Error::SerdeError(_)))
    ));
}

#[tokio::test]
async fn a_line_past_the_limit_ends_the_stream_with_an_error() {
    let chunk = "x".repeat(1024 * 1024);
    let parts = (0..=MAX_EVENT / chunk.len()).map(|_| ok(&chunk)).collect();
    let mut reader = frames(parts);
    match reader.next::<ConfigMap>().await {
        Some(Err(Error::ReadEvents(e))) => assert!(e.to_string().contains("longer than")),
        other => panic!("expected the length error, got {other:?}"),
    }
    assert!(reader.next::<ConfigMap>().await.is_none());
}

#[tokio::test]
async fn a_stream_cut_short_ends_quietly_and_other_errors_are_passed_on() {
    let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "gone");
    let mut reader = frames(vec![
        ok(&format!("{}\n", added("a"))),
        Err(Error::ReadEvents(eof)),
    ]);
    assert_eq!(name(reader.next().await), "a");
    assert!(reader.next::<ConfigMap>().await.is_none());

    let reset = std::io::Error::other("connection reset");
    let mut reader = frames(vec![Err(Error::ReadEvents(reset))]);
    assert!(matches!(
        reader.next::<ConfigMap>().await,
        Some(Err(Error::ReadEvents(_)))
    ));
    assert!(reader.next::<ConfigMap>().await.is_none());
}
