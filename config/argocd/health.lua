-- Health of any sftpgate object for Argo CD, computed as kstatus
-- computes it (kubectl wait, Flux): Progressing until the controller has
-- seen the current generation, and while Reconciling (a test of a new spec
-- or Secret is due or running); Degraded while Stalled (only a change to
-- the spec, its Secret or the server's account can help); Healthy when
-- Ready; Progressing while Ready is false for a reason that is retried.
local hs = {status = "Progressing", message = "Waiting for the controller"}
-- "reason: message", from what the condition has of them.
local function says(c)
  if c.reason ~= nil and c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason or c.message or (c.type .. " is " .. tostring(c.status))
end
if obj.status == nil then
  return hs
end
local observed, generation = obj.status.observedGeneration, obj.metadata.generation
if observed ~= nil and generation ~= nil and observed ~= generation then
  hs.message = "Waiting for the controller to see the latest change"
  return hs
end
local conditions = obj.status.conditions or {}
for _, c in ipairs(conditions) do
  if c.type == "Reconciling" and c.status == "True" then
    hs.message = says(c)
    return hs
  end
  if c.type == "Stalled" and c.status == "True" then
    hs.status = "Degraded"
    hs.message = says(c)
    return hs
  end
end
for _, c in ipairs(conditions) do
  if c.type == "Ready" then
    if c.status == "True" then
      hs.status = "Healthy"
      hs.message = c.message or "Ready"
    else
      hs.message = says(c)
    end
    return hs
  end
end
if observed ~= nil then
  hs.status = "Healthy"
  hs.message = "Current"
end
return hs
