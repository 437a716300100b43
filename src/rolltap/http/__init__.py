"""HTTP and JSON plumbing that several parts share, below all of them.

The gateway, the serve API and the dialects use these; this package imports nothing of
rolltap's but :mod:`rolltap.errors`. Its modules are imported one by one (this file
imports none), so a part that needs only :mod:`rolltap.http.json_body` does not load
aiohttp:

- :mod:`rolltap.http.json_body`: a request body that must be a JSON object;
- :mod:`rolltap.http.auth`: bearer tokens, checked in constant time and throttled;
- :mod:`rolltap.http.body`: reading a request body within a size and a time limit;
- :mod:`rolltap.http.errors`: rolltap errors as HTTP answers, and the middleware that
  turns every error of an application into one.
"""
