"""The official `anthropic`, `openai` and `google-genai` Python clients against a running
sluice, with only their base URL changed. Run by tests/clients.rs; exits non-zero on the first check that fails.
SLUICE_URL is the gateway, SLUICE_KEY a key it knows."""

import os
import sys
import time

import anthropic
import openai
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gt
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI

URL = os.environ["SLUICE_URL"]
KEY = os.environ["SLUICE_KEY"]
checked = []
started = time.monotonic()


def lap():
    return f"{time.monotonic() - started:.1f}s"


def check(name, ok, seen=None):
    if not ok:
        print(f"FAILED {name}: {seen!r}", file=sys.stderr)
        sys.exit(1)
    checked.append(f"{name} ({lap()})")


def raises(name, cls, call):
    try:
        got = call()
    except cls as e:
        checked.append(f"{name} ({lap()})")
        return e
    except Exception as e:  # the wrong class
        check(name, False, f"{type(e).__name__}: {e}")
    check(name, False, f"no error: {got!r}")


if os.environ.get("SLUICE_PART") == "draining":
    # A gateway draining for shutdown answers 503 (529 `overloaded_error` to Messages
    # clients) with `retry-after: 1`: each SDK retries twice, waiting as told.
    for name, cls, call in [
        ("openai", openai.InternalServerError, lambda: openai.OpenAI(
            base_url=URL + "/v1", api_key=KEY, max_retries=2).chat.completions.create(
                model="ok", messages=[{"role": "user", "content": "hi"}])),
        ("anthropic", anthropic.OverloadedError, lambda: anthropic.Anthropic(
            base_url=URL, api_key=KEY, max_retries=2).messages.create(
                model="ok", max_tokens=8, messages=[{"role": "user", "content": "hi"}])),
    ]:
        t0 = time.monotonic()
        e = raises(f"{name} retries sluice's {cls.__name__}", cls, call)
        waited = time.monotonic() - t0
        check(f"{name} got status {e.status_code}", e.status_code in (503, 529), e.status_code)
        check(f"{name} waits as told ({waited:.2f} s)", 1.9 <= waited < 6, waited)
    print(f"{len(checked)} checks passed:\n" + "\n".join(checked))
    sys.exit(0)

a = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=0)
o = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)
HI = [{"role": "user", "content": "hi"}]
TOOLS = [{"name": "weather", "description": "The weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
HISTORY = [
    {"role": "user", "content": "weather in Oslo?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should use the tool.", "signature": "sig"},
        {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": "-3C"}]},
]

# --- anthropic: Messages, to an OpenAI-compatible upstream and to an Anthropic one ---
m = a.messages.create(model="ok", max_tokens=64, system="Be brief.", messages=HI)
check("anthropic create (openai upstream)", m.type == "message"
      and m.content[0].text == "Hello from upstream" and m.stop_reason == "end_turn", m)
check("anthropic usage mapped", m.usage.input_tokens == 86
      and m.usage.cache_read_input_tokens == 1920 and m.usage.output_tokens == 300, m.usage)
for model, want in [("ok", "Hello from upstream"), ("claude", "Bonjour")]:
    m = a.messages.create(model=model, max_tokens=64, tools=TOOLS,
                          tool_choice={"type": "auto"}, messages=HISTORY)
    check(f"anthropic tools and thinking history ({model})", m.content[0].text == want, m)
for model, want in [("ok", "Hello"), ("claude", "Bonjour")]:
    with a.messages.stream(model=model, max_tokens=64, messages=HISTORY, tools=TOOLS) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    check(f"anthropic stream text, history with thinking ({model})", text == want, text)
    check(f"anthropic stream final ({model})", final.stop_reason == "end_turn"
          and final.usage.output_tokens > 0, final)
n = a.messages.count_tokens(model="ok", messages=HI, system="Be brief.")
check("anthropic count_tokens", n.input_tokens > 0, n)
raises("anthropic 400 (user message without content)", anthropic.BadRequestError,
       lambda: a.messages.create(model="ok", max_tokens=64, messages=[{"role": "user"}]))
raises("anthropic 400 (tool_result answering nothing)", anthropic.BadRequestError,
       lambda: a.messages.create(model="ok", max_tokens=64, messages=[
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]))
bad = anthropic.Anthropic(base_url=URL, api_key="sk-wrong", max_retries=0)
raises("anthropic 401", anthropic.AuthenticationError,
       lambda: bad.messages.create(model="ok", max_tokens=64, messages=HI))
narrow = anthropic.Anthropic(base_url=URL, api_key=os.environ["SLUICE_NARROW_KEY"], max_retries=0)
raises("anthropic 403 (a key not allowed the model)", anthropic.PermissionDeniedError,
       lambda: narrow.messages.create(model="claude", max_tokens=64, messages=HI))
raises("anthropic 404", anthropic.NotFoundError,
       lambda: a.messages.create(model="no-such-model", max_tokens=64, messages=HI))
e = raises("anthropic 429", anthropic.RateLimitError,
           lambda: a.messages.create(model="limited-direct", max_tokens=64, messages=HI))
check("anthropic 429 says when", e.response.headers.get("retry-after") == "7", e.response.headers)
raises("anthropic 5xx", anthropic.InternalServerError,
       lambda: a.messages.create(model="broken", max_tokens=64, messages=HI))

# --- openai: chat completions ---
r = o.chat.completions.create(model="ok", messages=HI)
check("openai chat", r.choices[0].message.content == "Hello from upstream", r)
r = o.chat.completions.create(model="claude", messages=HI, tools=[{"type": "function",
    "function": {"name": "weather", "parameters": {"type": "object"}}}])
check("openai chat with tools (anthropic upstream)", r.choices[0].message.content == "Bonjour", r)
text = "".join(c.choices[0].delta.content or "" for c in
               o.chat.completions.create(model="ok", messages=HI, stream=True) if c.choices)
check("openai chat stream", text == "Hello", text)
raises("openai 400 (user message without content)", openai.BadRequestError,
       lambda: o.chat.completions.create(model="ok", messages=[{"role": "user"}]))
raises("openai 400 (tool message without tool_call_id)", openai.BadRequestError,
       lambda: o.chat.completions.create(model="ok", messages=[
           {"role": "user", "content": "q"}, {"role": "tool", "content": "r"}]))
raises("openai 401", openai.AuthenticationError,
       lambda: openai.OpenAI(base_url=URL + "/v1", api_key="sk-wrong", max_retries=0)
       .chat.completions.create(model="ok", messages=HI))
raises("openai 403 (a key not allowed the model)", openai.PermissionDeniedError,
       lambda: openai.OpenAI(base_url=URL + "/v1", api_key=os.environ["SLUICE_NARROW_KEY"],
                             max_retries=0).chat.completions.create(model="claude", messages=HI))
raises("openai 404", openai.NotFoundError,
       lambda: o.chat.completions.create(model="no-such-model", messages=HI))
raises("openai 429", openai.RateLimitError,
       lambda: o.chat.completions.create(model="limited-direct", messages=HI))
raises("openai 5xx", openai.InternalServerError,
       lambda: o.chat.completions.create(model="broken", messages=HI))

# --- openai: embeddings (the SDK asks for base64 unless told, and decodes it) ---
VECTOR = [0.5, -0.25, 1.0]
e = o.embeddings.create(model="embed", input=["a", "b"])
check("openai embeddings (base64, decoded)", [d.embedding for d in e.data] == [VECTOR, VECTOR]
      and e.usage.prompt_tokens == 10, e)
e = o.embeddings.create(model="embed", input="a", encoding_format="float")
check("openai embeddings (float)", e.data[0].embedding == VECTOR, e)
e = o.embeddings.create(model="embed", input=[[1, 2, 3]])
check("openai embeddings (tokens)", len(e.data) == 1, e)
raises("openai embeddings 400", openai.BadRequestError,
       lambda: o.embeddings.create(model="embed", input=""))

# --- openai: Responses (stateless) ---
r = o.responses.create(model="ok", instructions="Be brief.", input="hi", max_output_tokens=40)
check("openai responses", r.output_text == "Hello from upstream" and r.status == "completed", r)
r = o.responses.create(model="claude", input=[{"role": "user", "content": "hi"}], tools=[
    {"type": "function", "name": "weather", "parameters": {"type": "object"}}])
check("openai responses (anthropic upstream, tools)", r.output_text == "Bonjour", r)
kinds, text = [], ""
for ev in o.responses.create(model="ok", input="hi", stream=True):
    kinds.append(ev.type)
    if ev.type == "response.output_text.delta":
        text += ev.delta
check("openai responses stream", text == "Hello" and kinds[0] == "response.created"
      and kinds[-1] == "response.completed", kinds)
with o.responses.stream(model="ok", input="hi") as s:
    final = s.get_final_response()
check("openai responses stream helper", final.output_text == "Hello", final)
r = o.responses.create(model="native", input="hi", reasoning={"effort": "low"})
check("openai responses (passed through)", r.id == "resp_up"
      and r.output_text == "Hello from responses", r)
with o.responses.stream(model="native", input="hi") as s:
    final = s.get_final_response()
check("openai responses stream (passed through)", final.output_text == "Hi!"
      and final.usage.input_tokens == 40, final)
raises("openai responses 400 (stateful field)", openai.BadRequestError,
       lambda: o.responses.create(model="ok", input="hi", previous_response_id="resp_1"))

# --- google-genai: Gemini's generateContent, to an OpenAI-compatible upstream and to an
# Anthropic one ---
g = genai.Client(api_key=KEY, http_options=gt.HttpOptions(
    base_url=URL, retry_options=gt.HttpRetryOptions(attempts=1)))
BRIEF = gt.GenerateContentConfig(system_instruction="Be brief.", max_output_tokens=64)
r = g.models.generate_content(model="ok", contents="hi", config=BRIEF)
check("genai generate_content (openai upstream)", r.text == "Hello from upstream"
      and r.candidates[0].finish_reason == gt.FinishReason.STOP, r)
u = r.usage_metadata
check("genai usage mapped", u.prompt_token_count == 2006 and u.cached_content_token_count == 1920
      and u.candidates_token_count == 300, u)
WEATHER = gt.Tool(function_declarations=[gt.FunctionDeclaration(
    name="weather", description="The weather in a city",
    parameters=gt.Schema(type="OBJECT", properties={"city": gt.Schema(type="STRING")}))])
G_HISTORY = [
    gt.Content(role="user", parts=[gt.Part(text="weather in Oslo?")]),
    gt.Content(role="model", parts=[gt.Part(function_call=gt.FunctionCall(
        name="weather", args={"city": "Oslo"}))]),
    gt.Content(role="user", parts=[gt.Part(function_response=gt.FunctionResponse(
        name="weather", response={"temperature": "-3C"}))]),
]
for model, want in [("ok", "Hello from upstream"), ("claude", "Bonjour")]:
    r = g.models.generate_content(model=model, contents=G_HISTORY,
                                  config=gt.GenerateContentConfig(tools=[WEATHER]))
    check(f"genai tools and a function's answer ({model})", r.text == want, r)
for model, want in [("ok", "Hello"), ("claude", "Bonjour")]:
    chunks = list(g.models.generate_content_stream(model=model, contents="hi"))
    text = "".join(c.text or "" for c in chunks)
    check(f"genai stream ({model})", text == want
          and chunks[-1].candidates[0].finish_reason == gt.FinishReason.STOP
          and chunks[-1].usage_metadata.candidates_token_count > 0, (text, chunks[-1]))
n = g.models.count_tokens(model="ok", contents="hi")
check("genai count_tokens", n.total_tokens > 0, n)
e = raises("genai 400 (a function answer for no call)", genai_errors.ClientError,
           lambda: g.models.generate_content(model="ok", contents=[gt.Content(role="user", parts=[
               gt.Part(function_response=gt.FunctionResponse(name="x", response={}))])]))
check("genai 400 names the part", e.code == 400 and "functionResponse" in e.message
      and e.status == "INVALID_ARGUMENT", e)
g_bad = genai.Client(api_key="sk-wrong", http_options=gt.HttpOptions(
    base_url=URL, retry_options=gt.HttpRetryOptions(attempts=1)))
e = raises("genai 401", genai_errors.ClientError,
           lambda: g_bad.models.generate_content(model="ok", contents="hi"))
check("genai 401 status", e.code == 401 and e.status == "UNAUTHENTICATED", e)
e = raises("genai 404", genai_errors.ClientError,
           lambda: g.models.generate_content(model="no-such-model", contents="hi"))
check("genai 404 status", e.code == 404 and e.status == "NOT_FOUND", e)
e = raises("genai 429", genai_errors.ClientError,
           lambda: g.models.generate_content(model="limited-direct", contents="hi"))
check("genai 429 status", e.code == 429 and e.status == "RESOURCE_EXHAUSTED", e)
raises("genai 5xx", genai_errors.ServerError,
       lambda: g.models.generate_content(model="broken", contents="hi"))

# --- LangChain, only `base_url` changed ---
def text_of(message):
    return message.text() if callable(message.text) else message.text


lc = ChatOpenAI(base_url=URL + "/v1", api_key=KEY, model="ok", max_retries=0)
check("langchain ChatOpenAI", text_of(lc.invoke("hi")) == "Hello from upstream")
check("langchain ChatOpenAI stream", "".join(text_of(c) for c in lc.stream("hi")) == "Hello")
# The fake OpenAI upstream answers "Hello from upstream" whole and "Hello" streamed.
for model, whole, streamed in [("ok", "Hello from upstream", "Hello"),
                               ("claude", "Bonjour", "Bonjour")]:
    la = ChatAnthropic(base_url=URL, api_key=KEY, model=model, max_retries=0)
    got = text_of(la.invoke("hi"))
    check(f"langchain ChatAnthropic ({model})", got == whole, got)
    got = "".join(text_of(c) for c in la.stream("hi"))
    check(f"langchain ChatAnthropic stream ({model})", got == streamed, got)

# --- the SDKs' own retries, told by sluice's `retry-after` to wait 1 s each time ---
for name, cls, call in [
    ("anthropic", anthropic.RateLimitError, lambda: anthropic.Anthropic(
        base_url=URL, api_key=KEY, max_retries=2).messages.create(
            model="limited-1s", max_tokens=64, messages=HI)),
    ("openai", openai.RateLimitError, lambda: openai.OpenAI(
        base_url=URL + "/v1", api_key=KEY, max_retries=2).chat.completions.create(
            model="limited-1s", messages=HI)),
]:
    t0 = time.monotonic()
    raises(f"{name} retries a 429", cls, call)
    waited = time.monotonic() - t0
    # Twice as told (1 s each); their own backoff would have waited about 1.5 s in all.
    check(f"{name} waits as told ({waited:.2f} s)", 1.9 <= waited < 6, waited)

print(f"{len(checked)} checks passed:\n" + "\n".join(checked))
