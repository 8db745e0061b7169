import os

from flask import Flask, request
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

app = Flask(__name__)
webhook = Webhook(os.environ["WEBHOOK_SECRET"])  # the whsec_... the create answer showed
seen = []


def subject(event: dict) -> str | None:
    """What the event is about: a key (key.*: `data.key`, shown as `<identifier>...`) or
    an identity (identity.*: `data.identity`); None for a type this receiver does not know
    yet, accepted all the same, so that it is not sent again."""
    data = event["data"]
    if event["type"].startswith("key."):
        return data["key"]["key"]
    if event["type"].startswith("identity."):
        return data["identity"]["external_id"]
    return None


@app.post("/api-keys")
def key_event():
    try:  # a wrong signature, or a timestamp more than 5 minutes off, is refused
        event = webhook.verify(request.get_data(), request.headers)
    except WebhookVerificationError:
        return "", 400
    seen.append((request.headers["webhook-id"], event["type"], subject(event)))
    return "", 204
