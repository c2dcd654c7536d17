//! Context efficiency: what sluice decides about the prompt itself, apart from where it goes.
//! [`churn`] tells why requests that should share a cached prefix do not (a timestamp, a
//! date, an id, reordered tools or keys, whitespace), from a sample of their stable prefix,
//! never keeping or reporting the text; [`normalise`] rewrites what churns; [`passages`]
//! cuts a long document into ranked passages, which [`compress`] and [`progressive`] send
//! fewer of, counting tokens with a [`count::Count`].

pub mod churn;
pub mod compress;
pub mod count;
pub mod document;
pub mod normalise;
pub mod passages;
pub mod progressive;

/// What a model group does to its prompts before they go out; each part off when absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shaping {
    /// Normalisation for cacheable prefixes.
    pub normalise: Option<normalise::Normalise>,
    /// Compression of prompts over a token budget.
    pub compress: Option<compress::Compress>,
    /// Progressive loading of long documents.
    pub progressive: Option<progressive::Progressive>,
    /// Provider prompt-cache keys derived from tenant and prefix, spread past a rate.
    pub cache_key: Option<cache_key::Spread>,
}
pub mod cache_key;
