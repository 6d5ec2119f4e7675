"""The MQTT interface: CI submits and follows jobs; labd publishes events and state."""

from labd.mqtt.bridge import ArtefactLinks, MqttBridge
from labd.mqtt.broker import Accounts, EmbeddedBroker, listening
from labd.mqtt.client import broker_credentials, default_client_id
from labd.mqtt.inbound import Inbound
from labd.mqtt.messages import ApiSubmission
from labd.mqtt.schemas import export_files
from labd.mqtt.topics import Topics

__all__ = [
    "Accounts",
    "ApiSubmission",
    "ArtefactLinks",
    "EmbeddedBroker",
    "Inbound",
    "MqttBridge",
    "Topics",
    "broker_credentials",
    "default_client_id",
    "export_files",
    "listening",
]
