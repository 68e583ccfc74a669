//! The in-process bus: protocol batches, requests and their failures, counters.

use std::time::Duration;

use paros_bus::{BusStats, InProcessBus};
use paros_core::{Call, CallAnswer, JournalId, JournalKey, Message, NodeId, Seq, Slot, TenantId};
use paros_node::ports::{Envelope, Transport};
use paros_node::rpc::{Incoming, NodeAnswer, NodeRequest, Rpc, RpcError};

const A: NodeId = NodeId(0x0a0a_0a0a);
const B: NodeId = NodeId(0x0b0b_0b0b);
const GHOST: NodeId = NodeId(0x6666);

fn key() -> JournalKey {
    JournalKey { tenant: TenantId(7), journal: JournalId(9) }
}

fn catch_up(from: NodeId, round: u64) -> Envelope {
    Envelope { journal: key(), from, message: Message::CatchUpRequest { from: Slot(round), life: paros_core::Life(1) } }
}

fn truncate_request() -> NodeRequest {
    NodeRequest::Call {
        journal: key(),
        id: paros_core::CallId(1),
        call: Call::Truncate { leader: None, up_to: Seq(3) },
    }
}

#[tokio::test]
async fn a_protocol_batch_arrives_as_one_message() {
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, mut b_inbox) = bus.register(B, 8);

    let batch = vec![catch_up(A, 1), catch_up(A, 2), catch_up(A, 3)];
    a.send(B, batch.clone());

    match b_inbox.recv().await.expect("an item") {
        Incoming::Protocol { from, envelopes } => {
            assert_eq!(from, A);
            assert_eq!(envelopes, batch);
        }
        Incoming::Request { .. } | Incoming::Requests(_) | Incoming::Published { .. } => {
            panic!("expected a protocol batch")
        }
    }
    assert_eq!(
        bus.stats(),
        BusStats { messages_sent: 1, envelopes_sent: 3, dropped: 0, requests: 0, request_items: 0, feed_publishes: 0 }
    );
}

#[tokio::test]
async fn an_empty_batch_is_a_machine_heartbeat_and_is_delivered() {
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, mut b_inbox) = bus.register(B, 8);
    a.send(B, Vec::new());
    match b_inbox.try_recv() {
        Ok(Incoming::Protocol { from, envelopes }) => assert_eq!((from, envelopes.len()), (A, 0)),
        other => panic!("expected a heartbeat, got {other:?}"),
    }
    assert_eq!(bus.stats().messages_sent, 1);
}

#[tokio::test]
async fn a_request_is_answered() {
    let bus = InProcessBus::new();
    let (a, _a_inbox) = bus.register(A, 8);
    let (_b, mut b_inbox) = bus.register(B, 8);

    let server = tokio::spawn(async move {
        match b_inbox.recv().await.expect("an item") {
            Incoming::Request { request, reply } => {
                assert_eq!(request, truncate_request());
                reply.send(NodeAnswer::Call(CallAnswer::Busy)).expect("caller waits");
            }
            Incoming::Protocol { .. } | Incoming::Published { .. } | Incoming::Requests(_) => {
                panic!("expected a request")
            }
        }
    });

    let answer = a.request(B, truncate_request(), Duration::from_secs(5)).await;
    assert_eq!(answer, Ok(NodeAnswer::Call(CallAnswer::Busy)));
    server.await.expect("server ran");
    assert_eq!(bus.stats().requests, 1);
}

#[tokio::test]
async fn the_bus_itself_makes_requests() {
    let bus = InProcessBus::new();
    let (_b, mut b_inbox) = bus.register(B, 8);
    tokio::spawn(async move {
        while let Some(item) = b_inbox.recv().await {
            if let Incoming::Request { reply, .. } = item {
                let _ = reply.send(NodeAnswer::UnknownJournal);
            }
        }
    });
    let answer = bus.request(B, truncate_request(), Duration::from_secs(5)).await;
    assert_eq!(answer, Ok(NodeAnswer::UnknownJournal));
}

#[tokio::test]
async fn a_request_to_an_unknown_node_has_no_route() {
    let bus = InProcessBus::new();
    let (a, _a_inbox) = bus.register(A, 8);
    let answer = a.request(GHOST, truncate_request(), Duration::from_secs(5)).await;
    assert_eq!(answer, Err(RpcError::NoRoute(GHOST)));
}

#[tokio::test(start_paused = true)]
async fn an_unregistered_node_is_gone() {
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, _b_inbox) = bus.register(B, 8);
    assert!(bus.is_registered(B));
    assert!(bus.unregister(B));
    assert!(!bus.unregister(B));
    assert!(!bus.is_registered(B));

    let start = tokio::time::Instant::now();
    let answer = a.request(B, truncate_request(), Duration::from_secs(5)).await;
    assert_eq!(answer, Err(RpcError::NoRoute(B)));
    assert_eq!(start.elapsed(), Duration::ZERO, "fails fast, not at the deadline");

    a.send(B, vec![catch_up(A, 1)]);
    assert_eq!(
        bus.stats(),
        BusStats { messages_sent: 0, envelopes_sent: 0, dropped: 1, requests: 1, request_items: 0, feed_publishes: 0 }
    );
}

#[tokio::test]
async fn a_node_whose_inbox_is_dropped_has_no_route() {
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, b_inbox) = bus.register(B, 8);
    drop(b_inbox);
    assert!(!bus.is_registered(B));
    let answer = a.request(B, truncate_request(), Duration::from_secs(5)).await;
    assert_eq!(answer, Err(RpcError::NoRoute(B)));
    a.send(B, vec![catch_up(A, 1)]);
    assert_eq!(bus.stats().dropped, 1);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_times_out_at_the_deadline() {
    let bus = InProcessBus::new();
    let (a, _a_inbox) = bus.register(A, 8);
    // B holds its inbox (and so the responder) but never reads it.
    let (_b, _b_inbox) = bus.register(B, 8);

    let deadline = Duration::from_millis(750);
    let start = tokio::time::Instant::now();
    let answer = a.request(B, truncate_request(), deadline).await;
    assert_eq!(answer, Err(RpcError::Timeout));
    assert_eq!(start.elapsed(), deadline);
}

#[tokio::test]
async fn a_dropped_responder_is_dropped() {
    let bus = InProcessBus::new();
    let (a, _a_inbox) = bus.register(A, 8);
    let (_b, mut b_inbox) = bus.register(B, 8);

    let server = tokio::spawn(async move {
        match b_inbox.recv().await.expect("an item") {
            Incoming::Request { reply, .. } => drop(reply),
            Incoming::Protocol { .. } | Incoming::Published { .. } | Incoming::Requests(_) => {
                panic!("expected a request")
            }
        }
    });

    let answer = a.request(B, truncate_request(), Duration::from_secs(5)).await;
    assert_eq!(answer, Err(RpcError::Dropped));
    server.await.expect("server ran");
}

#[tokio::test]
async fn a_request_left_in_a_dropped_inbox_is_dropped() {
    let bus = InProcessBus::new();
    let (a, _a_inbox) = bus.register(A, 8);
    let (_b, b_inbox) = bus.register(B, 8);

    let caller = tokio::spawn(async move { a.request(B, truncate_request(), Duration::from_secs(5)).await });
    // Wait until the request sits in the inbox, then the node stops without reading it.
    while b_inbox.is_empty() {
        tokio::task::yield_now().await;
    }
    drop(b_inbox);
    assert_eq!(caller.await.expect("caller ran"), Err(RpcError::Dropped));
}

#[tokio::test]
async fn a_full_inbox_drops_protocol_messages_and_counts_them() {
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, mut b_inbox) = bus.register(B, 2);

    for round in 1..=5 {
        a.send(B, vec![catch_up(A, round), catch_up(A, round)]);
    }
    assert_eq!(
        bus.stats(),
        BusStats { messages_sent: 2, envelopes_sent: 4, dropped: 3, requests: 0, request_items: 0, feed_publishes: 0 }
    );

    // The first two arrived, in order; the rest are gone.
    for round in 1..=2 {
        match b_inbox.recv().await.expect("an item") {
            Incoming::Protocol { envelopes, .. } => assert_eq!(envelopes[0], catch_up(A, round)),
            Incoming::Request { .. } | Incoming::Requests(_) | Incoming::Published { .. } => {
                panic!("expected a protocol batch")
            }
        }
    }
    assert!(b_inbox.try_recv().is_err());

    // With room again, sends go through.
    a.send(B, vec![catch_up(A, 6)]);
    assert!(b_inbox.try_recv().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_request_waits_for_room_in_a_full_inbox() {
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, mut b_inbox) = bus.register(B, 1);
    a.send(B, vec![catch_up(A, 1)]);

    // Never drained: the request waits for room until the deadline.
    let deadline = Duration::from_millis(300);
    let start = tokio::time::Instant::now();
    assert_eq!(a.request(B, truncate_request(), deadline).await, Err(RpcError::Timeout));
    assert_eq!(start.elapsed(), deadline);

    // Drained later: the request gets in and is answered.
    let caller = {
        let a = a.clone();
        tokio::spawn(async move { a.request(B, truncate_request(), Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(matches!(b_inbox.recv().await, Some(Incoming::Protocol { .. })));
    match b_inbox.recv().await.expect("an item") {
        Incoming::Request { reply, .. } => {
            reply.send(NodeAnswer::UnknownJournal).expect("caller waits");
        }
        Incoming::Protocol { .. } | Incoming::Published { .. } | Incoming::Requests(_) => {
            panic!("expected a request")
        }
    }
    assert_eq!(caller.await.expect("caller ran"), Ok(NodeAnswer::UnknownJournal));
    assert_eq!(bus.stats().dropped, 0, "requests are never dropped for a full inbox");
}

#[tokio::test]
async fn re_registering_replaces_the_inbox() {
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, mut old_inbox) = bus.register(B, 8);
    let (b, mut new_inbox) = bus.register(B, 8);
    assert_eq!(b.node(), B);
    a.send(B, vec![catch_up(A, 1)]);
    assert!(new_inbox.try_recv().is_ok());
    assert!(old_inbox.try_recv().is_err());
}

/// Every future to completion, polled together in this task, their outputs in order.
async fn join_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (f, out) in pending.iter_mut().zip(done.iter_mut()) {
            if out.is_none()
                && let std::task::Poll::Ready(v) = f.as_mut().poll(cx)
            {
                *out = Some(v);
            }
        }
        if done.iter().all(Option::is_some) { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
    done.into_iter().map(|o| o.expect("done")).collect()
}

/// Polls `f` once.
async fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *f).poll(cx))).await
}

#[tokio::test]
async fn requests_made_together_travel_as_one_inbox_item_in_order() {
    let bus = InProcessBus::new();
    let (_b, mut b_inbox) = bus.register(B, 8);
    let server = tokio::spawn(async move {
        let Some(Incoming::Requests(requests)) = b_inbox.recv().await else { panic!("one item of requests") };
        let ids: Vec<u64> = requests
            .into_iter()
            .map(|(request, reply)| {
                let _ = reply.send(NodeAnswer::UnknownJournal);
                match request {
                    NodeRequest::Call { id, .. } => id.0,
                    NodeRequest::Read { .. } => panic!("calls only"),
                }
            })
            .collect();
        ids
    });
    let call = |n: u64| {
        let NodeRequest::Call { journal, call, .. } = truncate_request() else { unreachable!() };
        bus.request(B, NodeRequest::Call { journal, id: paros_core::CallId(n), call }, Duration::from_secs(5))
    };
    let answers = join_all((1..=10).map(call)).await;
    assert!(answers.iter().all(|a| *a == Ok(NodeAnswer::UnknownJournal)), "{answers:?}");
    assert_eq!(server.await.unwrap(), (1..=10).collect::<Vec<_>>(), "in the order they were made");
    assert_eq!((bus.stats().requests, bus.stats().request_items), (10, 1));
}

#[tokio::test]
async fn a_carrier_that_gives_up_still_sends_the_requests_it_carried() {
    let bus = InProcessBus::new();
    let (_b, mut b_inbox) = bus.register(B, 8);
    let mut carrier = Box::pin(bus.request(B, truncate_request(), Duration::from_secs(5)));
    assert!(poll_once(&mut carrier).await.is_pending(), "the carrier waits a turn for company");
    let mut rider = Box::pin(bus.request(B, truncate_request(), Duration::from_secs(5)));
    assert!(poll_once(&mut rider).await.is_pending());
    drop(carrier);
    let Some(Incoming::Requests(requests)) = b_inbox.recv().await else { panic!("both requests, sent on drop") };
    assert_eq!(requests.len(), 2);
    for (_, reply) in requests {
        let _ = reply.send(NodeAnswer::UnknownJournal);
    }
    assert_eq!(rider.await, Ok(NodeAnswer::UnknownJournal));
}

#[tokio::test]
async fn requests_carried_to_an_inbox_that_closed_are_answered_busy() {
    let bus = InProcessBus::new();
    let (_b, b_inbox) = bus.register(B, 8);
    let mut carrier = Box::pin(bus.request(B, truncate_request(), Duration::from_secs(5)));
    assert!(poll_once(&mut carrier).await.is_pending());
    drop(b_inbox);
    // Busy: nothing was done, ask again (not Dropped, which would leave the call in doubt).
    assert_eq!(carrier.await, Ok(NodeAnswer::Call(CallAnswer::Busy)));
    assert!(!bus.is_registered(B));
}

#[tokio::test]
async fn a_batch_sent_to_a_feed_is_published_once_and_reaches_every_subscriber() {
    const FEED: NodeId = NodeId(0xfeed);
    const C: NodeId = NodeId(0x0c0c_0c0c);
    let bus = InProcessBus::new();
    let (mut a, _a_inbox) = bus.register(A, 8);
    let (_b, mut b_inbox) = bus.register(B, 8);
    let (_c, mut c_inbox) = bus.register(C, 8);
    bus.subscribe(FEED, B);
    bus.subscribe(FEED, C);
    bus.subscribe(FEED, C);
    let batch = vec![catch_up(A, 1), catch_up(A, 2)];
    a.send(FEED, batch.clone());
    let mut shared = Vec::new();
    for inbox in [&mut b_inbox, &mut c_inbox] {
        match inbox.try_recv() {
            Ok(Incoming::Published { from, envelopes }) => {
                assert_eq!((from, envelopes.to_vec()), (A, batch.clone()));
                shared.push(envelopes);
            }
            other => panic!("a subscriber missed the feed's batch: {other:?}"),
        }
        assert!(inbox.try_recv().is_err(), "one copy per subscriber, however often it subscribed");
    }
    assert!(std::sync::Arc::ptr_eq(&shared[0], &shared[1]), "the subscribers share the publisher's one batch");
    assert_eq!(bus.stats().feed_publishes, 1, "one publish");
    assert!(bus.unsubscribe(FEED, C));
    a.send(FEED, batch.clone());
    assert!(
        matches!(b_inbox.try_recv(), Ok(Incoming::Protocol { envelopes, .. }) if envelopes == batch),
        "a lone subscriber still gets it, as a batch of its own"
    );
    assert!(c_inbox.try_recv().is_err(), "an unsubscribed node does not");
}
