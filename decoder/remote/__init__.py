"""An OpenAI-compatible HTTP backend (vLLM, SGLang, llama.cpp server, ...) for when one machine is not enough.

Used only when configured: nothing leaves the machine otherwise. `RemoteConfig` names the server, the
model and the environment variable holding the API key (the key itself is read per request, never stored
or logged); `stream_completion` / `stream_chat` stream the answer (SSE) and close the HTTP stream as soon
as the caller's interrupt, a deadline or a stop rule says so.
"""

from decoder.remote.client import (
    RemoteConfig,
    RemoteError,
    RemoteResult,
    stream_chat,
    stream_completion,
)

__all__ = ["RemoteConfig", "RemoteError", "RemoteResult", "stream_chat", "stream_completion"]
