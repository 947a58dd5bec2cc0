"""Operations: liveness, readiness (a painter can work and the default model is loaded), Prometheus metrics."""

from __future__ import annotations

import asyncio
import ipaddress

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response

from anipaint.service.deps import MetricsDep, QueueDep, SettingsDep
from anipaint.service.schemas import HealthOut, ReadyOut, responses

router = APIRouter(tags=["service"])


@router.get("/healthz", response_model=HealthOut, summary="The process is alive")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz", response_model=ReadyOut, summary="A painter can work now", responses=responses(503))
async def readyz(request: Request, jobs: QueueDep) -> JSONResponse:
    readiness = request.app.state.readiness
    problem = await asyncio.to_thread(jobs.health)  # asks Redis and the object store over the network
    if problem is None and readiness.ready:
        every = await asyncio.to_thread(readiness.states)
        states = {st.style.id: st.state for st in every if st.state != "unavailable"}
        return JSONResponse({"status": "ready", "style": readiness.style_id, "styles": states})
    return JSONResponse({"detail": problem or readiness.state}, 503, headers={"Retry-After": "2"})


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **responses(403)},
)
async def prometheus(request: Request, s: SettingsDep, metrics: MetricsDep) -> Response:
    if not metrics_allowed(s.metrics_allow, request.client.host if request.client else None):
        raise HTTPException(403, "metrics are not available to this address")
    return Response(metrics.render(), media_type=metrics.content_type)


def metrics_allowed(allow: str, host: str | None) -> bool:
    """``allow``: comma-separated addresses or networks (``10.0.0.0/8``); empty allows everyone."""
    networks = [part.strip() for part in allow.split(",") if part.strip()]
    if not networks:
        return True
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in networks)
