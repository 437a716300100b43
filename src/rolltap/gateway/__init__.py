"""The interception gateway: servers, rollouts, intercepts, the admin API."""

from rolltap.gateway.gateway import Gateway
from rolltap.gateway.limits import RolloutLimits
from rolltap.gateway.observer import RolloutObserver
from rolltap.gateway.rollout import Intercept, Rollout

__all__ = ["Gateway", "Intercept", "Rollout", "RolloutLimits", "RolloutObserver"]
