-- Argo CD health check for tokenfleet.dev/LLMService, from the conditions the operator
-- writes (tokenfleet.controller.status; Autoscaling by the autoscaler). Install it as
-- resource.customizations.health.tokenfleet.dev_LLMService in argocd-cm (argocd-cm.yaml).
local hs = {}

local function condition(conditions, type)
  for _, c in ipairs(conditions or {}) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local status = obj.status
if status == nil or status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the tokenfleet operator to plan this LLMService"
  return hs
end
local generation = (obj.metadata or {}).generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile generation " .. generation
  return hs
end

local degraded = condition(status.conditions, "Degraded")
local ready = condition(status.conditions, "Ready")
local progressing = condition(status.conditions, "Progressing")
local autoscaling = condition(status.conditions, "Autoscaling")

if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = degraded.reason .. ": " .. (degraded.message or "")
  return hs
end
if ready ~= nil and ready.reason == "ScaledToZero" then
  hs.status = "Suspended"
  hs.message = "Scaled to zero replicas"
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  -- Serving, but the autoscaler cannot do its job: say so without failing the sync.
  if autoscaling ~= nil and (autoscaling.reason == "Held" or autoscaling.reason == "LimitedAtMax") then
    hs.message = hs.message .. "; autoscaling " .. autoscaling.reason .. ": " .. (autoscaling.message or "")
  end
  return hs
end
hs.status = "Progressing"
if progressing ~= nil and progressing.message ~= nil and progressing.message ~= "" then
  hs.message = progressing.message
elseif ready ~= nil then
  hs.message = ready.reason .. ": " .. (ready.message or "")
else
  hs.message = "Waiting for replicas"
end
return hs
