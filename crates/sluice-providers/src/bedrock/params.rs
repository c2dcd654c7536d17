//! What `[providers.NAME]` with `kind = "bedrock"` says beyond where the upstream is: its
//! region (SigV4 signs for one), and where its AWS credentials are read: the standard
//! environment variables, else a profile of the shared credentials file. Instance metadata
//! is never called.

use std::path::PathBuf;

/// A Bedrock provider's own settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct BedrockParams {
    /// The AWS region its requests are signed for (`us-east-1`).
    pub region: Option<String>,
    /// The shared credentials file's profile (else `AWS_PROFILE`, else `default`).
    pub profile: Option<String>,
    /// The shared credentials file (else `AWS_SHARED_CREDENTIALS_FILE`, else
    /// `~/.aws/credentials`).
    pub credentials_file: Option<PathBuf>,
}

/// AWS credentials, as SigV4 signs with them.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
    /// Where they were read, for messages.
    pub source: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl BedrockParams {
    /// What is wrong with it: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        match self.region.as_deref() {
            None => vec![(
                "region",
                "kind = \"bedrock\" needs `region` (the AWS region its requests are signed for)"
                    .into(),
            )],
            Some(r)
                if r.is_empty()
                    || !r
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') =>
            {
                vec![(
                    "region",
                    format!("`{r}` is not an AWS region like us-east-1"),
                )]
            }
            Some(_) => Vec::new(),
        }
    }

    /// The credentials to sign with: `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (with
    /// `AWS_SESSION_TOKEN`) from `env`, else the profile's in the shared credentials file;
    /// what was looked at and not found, when neither holds them.
    pub fn credentials(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Credentials, String> {
        if let (Some(access_key), Some(secret_key)) =
            (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
        {
            return Ok(Credentials {
                access_key,
                secret_key,
                session_token: env("AWS_SESSION_TOKEN"),
                source: "the environment".into(),
            });
        }
        let file = self
            .credentials_file
            .clone()
            .or_else(|| env("AWS_SHARED_CREDENTIALS_FILE").map(PathBuf::from))
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")));
        let profile = self
            .profile
            .clone()
            .or_else(|| env("AWS_PROFILE"))
            .unwrap_or_else(|| "default".into());
        let Some(file) = file else {
            return Err(
                "no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and no HOME to find a \
                        credentials file in"
                    .into(),
            );
        };
        let text = std::fs::read_to_string(&file).map_err(|e| {
            format!(
                "no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and `{}` does not read: {e}",
                file.display()
            )
        })?;
        profile_of(&text, &profile)
            .map(|(access_key, secret_key, session_token)| Credentials {
                access_key,
                secret_key,
                session_token,
                source: format!("profile `{profile}` of {}", file.display()),
            })
            .ok_or_else(|| {
                format!(
                    "no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and `{}` has no profile \
                     `{profile}` with aws_access_key_id and aws_secret_access_key",
                    file.display()
                )
            })
    }
}

/// The keys of `[profile]` in a shared credentials file: (access key, secret, session token).
fn profile_of(text: &str, profile: &str) -> Option<(String, String, Option<String>)> {
    let mut inside = false;
    let (mut access, mut secret, mut token) = (None, None, None);
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == profile;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = Some(v.trim().to_string()).filter(|v| !v.is_empty());
            match k.trim() {
                "aws_access_key_id" => access = v,
                "aws_secret_access_key" => secret = v,
                "aws_session_token" => token = v,
                _ => {}
            }
        }
    }
    Some((access?, secret?, token))
}
