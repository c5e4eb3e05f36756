-- Argo CD health of a SidecarSet (sidecarset.dev/v1alpha1), read from the
-- conditions its controller writes. Install it in argocd-cm under
-- resource.customizations.health.sidecarset.dev_SidecarSet (docs/gitops.md).
--
--   spec not observed yet                         Progressing
--   Stalled=True (the rollout paused itself)      Degraded
--   Complete=True (or the partition reached)      Healthy
--   updateStrategy.paused, not complete           Suspended
--   Progressing=True                              Progressing
--   NotUpdate: running pods keep their revision   Healthy
--   nothing to do, yet not complete (pods not
--   ready, to recreate, on lost nodes)            Degraded
local function condition(conditionType)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local generation = obj.metadata.generation or 0
if obj.status == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration < generation then
  return {status = "Progressing", message = "Waiting for the controller to observe the latest spec"}
end

local stalled = condition("Stalled")
if stalled ~= nil and stalled.status == "True" then
  return {status = "Degraded", message = stalled.message}
end
local complete = condition("Complete")
if complete ~= nil and complete.status == "True" then
  return {status = "Healthy", message = complete.message}
end
local strategy = obj.spec.updateStrategy or {}
if strategy.paused then
  local message = "updateStrategy.paused is true"
  if complete ~= nil then
    message = complete.message
  end
  return {status = "Suspended", message = message}
end
local progressing = condition("Progressing")
if progressing ~= nil and progressing.status == "True" then
  return {status = "Progressing", message = progressing.message}
end
if complete == nil then
  return {status = "Progressing", message = "Waiting for the controller's first status"}
end
if complete.reason == "NotUpdate" then
  return {status = "Healthy", message = complete.message}
end
return {status = "Degraded", message = complete.reason .. ": " .. complete.message}
