//! What a store of shared state answers with: ready at once when it lives in this process,
//! a boxed wait when it lives elsewhere. One object-safe trait per kind of shared state can
//! then serve both, and the in-process store costs no allocation.

use std::future::Future;
use std::pin::Pin;

/// A store's answer: [`now`] or [`later`].
pub type Reply<'a, T> = futures::future::Either<
    futures::future::Ready<T>,
    Pin<Box<dyn Future<Output = T> + Send + 'a>>,
>;

/// An answer known at once.
pub fn now<'a, T>(t: T) -> Reply<'a, T> {
    futures::future::Either::Left(futures::future::ready(t))
}

/// An answer that waits on `f`.
pub fn later<'a, T>(f: impl Future<Output = T> + Send + 'a) -> Reply<'a, T> {
    futures::future::Either::Right(Box::pin(f))
}
