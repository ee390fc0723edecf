-- Health of an SftpConnection or ApiKey for Argo CD: Healthy when Ready is
-- true for the current generation, Progressing until the controller has
-- looked at this generation, Degraded with Ready's reason and message
-- otherwise.
local hs = {status = "Progressing", message = "Waiting for the controller"}
-- "reason: message", from what the condition has of them.
local function says(c)
  if c.reason ~= nil and c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason or c.message or ("Ready is " .. tostring(c.status))
end
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then
    if c.observedGeneration ~= nil and obj.metadata.generation ~= nil and c.observedGeneration < obj.metadata.generation then
      hs.message = "Waiting for the controller to see the latest change"
      return hs
    end
    if c.status == "True" then
      hs.status = "Healthy"
      hs.message = c.message or "Ready"
    elseif c.status == "Unknown" then
      hs.message = says(c)
    else
      hs.status = "Degraded"
      hs.message = says(c)
    end
    return hs
  end
end
return hs
