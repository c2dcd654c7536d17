"""The official `openai` Python client's file and batch calls against a running sluice, with
only its base URL changed. Run by tests/batch_crash.rs; exits non-zero on the first check that
fails. SLUICE_URL is the gateway."""

import io
import json
import os
import sys
import time

import openai

URL = os.environ["SLUICE_URL"]
client = openai.OpenAI(base_url=URL + "/v1", api_key="unused", max_retries=0)
checked = []


def check(name, ok, seen=None):
    if not ok:
        print(f"FAILED {name}: {seen!r}", file=sys.stderr)
        sys.exit(1)
    checked.append(name)


def raises(name, cls, call):
    try:
        got = call()
    except cls as e:
        checked.append(name)
        return e
    except Exception as e:  # the wrong class
        check(name, False, f"{type(e).__name__}: {e}")
    check(name, False, f"no error: {got!r}")


def line(i, model="chat"):
    return json.dumps({
        "custom_id": f"doc-{i}", "method": "POST", "url": "/v1/chat/completions",
        "body": {"model": model, "max_tokens": 20, "messages": [
            {"role": "system", "content": "You review contracts."},
            {"role": "user", "content": f"Review clause {i}."}]}})


def upload(lines, name="in.jsonl"):
    data = ("\n".join(lines) + "\n").encode()
    return client.files.create(file=(name, io.BytesIO(data)), purpose="batch")


# A file, as the SDK uploads it (multipart), and read back.
f = upload([line(i) for i in range(12)])
check("file uploaded", f.id.startswith("file-") and f.purpose == "batch" and f.status == "processed", f)
check("file retrieved", client.files.retrieve(f.id).bytes == f.bytes)
check("file content as uploaded", client.files.content(f.id).text.count("\n") == 12)
listed = client.files.list()
check("files listed", any(x.id == f.id for x in listed.data), listed)

# A job, followed to its end as the SDK's users do.
b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                          completion_window="24h", metadata={"run": "sdk"})
check("batch created", b.status in ("validating", "in_progress") and b.request_counts.total == 12, b)
for _ in range(600):
    b = client.batches.retrieve(b.id)
    if b.status in ("completed", "failed", "expired", "cancelled"):
        break
    time.sleep(0.1)
check("batch completed", b.status == "completed" and b.request_counts.completed == 12, b)
check("batch metadata kept", b.metadata == {"run": "sdk"}, b.metadata)
check("batch usage", b.usage is not None and b.usage.input_tokens > 0, b.usage)
extra = b.model_extra or {}
check("progress beside OpenAI's fields", extra.get("sluice", {}).get("line") == "queued 0/12, running 0, done 12/12", extra)
out = client.files.content(b.output_file_id).text.strip().split("\n")
rows = [json.loads(x) for x in out]
check("one output line per item", sorted(r["custom_id"] for r in rows) == sorted(f"doc-{i}" for i in range(12)), rows)
check("answers in the lines", all(r["response"]["status_code"] == 200 and r["response"]["body"]["choices"] for r in rows), rows[0])

# Pages: the SDK's cursor walks every job.
second = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
page = client.batches.list(limit=1)
check("one job a page", len(page.data) == 1 and page.has_more, page)
walked = [x.id for x in client.batches.list(limit=1)]
check("the cursor walks every job", second.id in walked and b.id in walked, walked)

# Cancelled at once (it may have ended first).
c = client.batches.cancel(second.id)
check("cancel answers", c.status in ("cancelling", "cancelled", "completed"), c)

# Refusals, in the SDK's error classes, naming the line.
e = raises("a bad file is a BadRequestError", openai.BadRequestError,
           lambda: upload([line(0), "{not json", line(0)]))
check("the bad lines named", "line 2" in str(e) and "line 3" in str(e), str(e))
raises("an unknown job is a NotFoundError", openai.NotFoundError,
       lambda: client.batches.retrieve("batch_nope"))
raises("a window other than 24h is a BadRequestError", openai.BadRequestError,
       lambda: client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                     completion_window="1h"))
deleted = client.files.delete(f.id)
check("file deleted", deleted.deleted, deleted)
raises("a deleted file is gone", openai.NotFoundError, lambda: client.files.retrieve(f.id))

print(f"{len(checked)} checks passed: " + "; ".join(checked))
