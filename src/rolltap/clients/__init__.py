"""Upstreams behind one interface, and the model clients they send through.

:class:`~rolltap.clients.upstream.Upstream` is the interface (rewrite a call, then call);
:class:`~rolltap.clients.relay_upstream.RelayUpstream` forwards calls in the endpoint's
dialect (eval), :class:`~rolltap.clients.token_upstream.TokenUpstream` renders them to
token ids for a completions API (train), :class:`~rolltap.clients.fake.FakeUpstream`
answers from a script (tests); :func:`~rolltap.clients.kinds.upstream_for` chooses
between the first two when a rollout registers. :class:`RelayClient` is the pooled HTTP
client every real upstream sends through.
"""

from rolltap.clients.base import join_url
from rolltap.clients.kinds import upstream_for
from rolltap.clients.relay import RelayClient, UpstreamResponse
from rolltap.clients.relay_upstream import RelayUpstream
from rolltap.clients.token_upstream import TokenUpstream
from rolltap.clients.upstream import Answer, ModelRequest, Reply, Upstream, UpstreamRequest

__all__ = [
    "Answer",
    "ModelRequest",
    "RelayClient",
    "RelayUpstream",
    "Reply",
    "TokenUpstream",
    "Upstream",
    "UpstreamRequest",
    "UpstreamResponse",
    "join_url",
    "upstream_for",
]
