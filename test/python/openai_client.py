"""The official OpenAI Python client, unmodified, against Cohort's OpenAI-compatible API
(docs/generative.md): /v1/models, /v1/completions and /v1/chat/completions, streamed and not,
with logprobs.
Prints one JSON line per check ({"check", "ok", ...}) and {"done": true} at the end."""
import argparse
import json

import openai
from openai import OpenAI


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="chars")
    a = ap.parse_args()
    client = OpenAI(base_url=a.base_url, api_key="unused", max_retries=0, timeout=60)

    def check(name: str, ok: bool, **extra) -> None:
        print(json.dumps({"check": name, "ok": bool(ok), **extra}), flush=True)

    ids = [m.id for m in client.models.list()]
    check("models.list", a.model in ids, ids=ids)

    kw = dict(model=a.model, max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
    c = client.completions.create(prompt="once upon a time", **kw)
    text = c.choices[0].text
    check("completions", c.object == "text_completion" and len(text) == 24 and c.choices[0].finish_reason == "length"
          and c.usage.completion_tokens == 24 and c.usage.total_tokens == c.usage.prompt_tokens + 24, text=text)

    chunks = list(client.completions.create(prompt="once upon a time", stream=True, stream_options={"include_usage": True}, **kw))
    streamed = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    check("completions stream", streamed == text and finish == ["length"] and chunks[-1].choices == []
          and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 24, streamed=streamed)

    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    r = client.chat.completions.create(messages=msgs, **kw)
    content = r.choices[0].message.content
    check("chat.completions", r.object == "chat.completion" and r.choices[0].message.role == "assistant"
          and len(content) == 24 and r.choices[0].finish_reason == "length", content=content)

    stream = client.chat.completions.create(messages=msgs, stream=True, **kw)
    parts, roles, reasons = [], [], []
    for ch in stream:
        for choice in ch.choices:
            if choice.delta.role:
                roles.append(choice.delta.role)
            if choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    check("chat.completions stream", "".join(parts) == content and roles == ["assistant"] and reasons == ["length"])

    stop = client.chat.completions.create(messages=msgs, model=a.model, max_tokens=200, temperature=0, stop=["e", "a"])
    check("chat.completions stop", stop.choices[0].finish_reason in ("stop", "length")
          and "e" not in stop.choices[0].message.content and "a" not in stop.choices[0].message.content)

    lc = client.completions.create(prompt="once upon a time", logprobs=2, **kw)
    lp = lc.choices[0].logprobs
    offsets = [len("".join(lp.tokens[:i])) for i in range(len(lp.tokens))]
    check("completions logprobs", lp is not None and "".join(lp.tokens) == lc.choices[0].text and len(lp.token_logprobs) == 24
          and all(isinstance(x, float) and x <= 0 for x in lp.token_logprobs) and lp.text_offset == offsets
          and all(1 <= len(t) <= 3 and all(v <= 0 for v in t.values()) for t in lp.top_logprobs), tokens=lp.tokens if lp else None)

    lr = client.chat.completions.create(messages=msgs, logprobs=True, top_logprobs=2, **kw)
    content_lp = lr.choices[0].logprobs.content
    check("chat.completions logprobs", "".join(t.token for t in content_lp) == lr.choices[0].message.content and len(content_lp) == 24
          and all(len(t.top_logprobs) == 2 and t.logprob <= 0 and bytes(t.bytes or []).decode() == t.token for t in content_lp))

    streamed_lp = []
    for ch in client.chat.completions.create(messages=msgs, logprobs=True, top_logprobs=2, stream=True, **kw):
        for choice in ch.choices:
            if choice.logprobs and choice.logprobs.content:
                streamed_lp.extend((t.token, t.logprob) for t in choice.logprobs.content)
    check("chat.completions stream logprobs", streamed_lp == [(t.token, t.logprob) for t in content_lp])

    try:
        client.completions.create(model=a.model, prompt="x", max_tokens=0)
        check("bad max_tokens is a 400", False)
    except openai.BadRequestError as e:
        check("bad max_tokens is a 400", e.status_code == 400 and "max_tokens" in str(e), message=str(e))
    try:
        client.chat.completions.create(model="no-such-model", messages=msgs)
        check("unknown model is a 404", False)
    except openai.NotFoundError as e:
        check("unknown model is a 404", e.status_code == 404 and "no-such-model" in str(e))
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    main()
