-- Hooks for examples/signed-api-lua.yaml: the signed API of
-- examples/signed-api.yaml, signed in Lua instead of by templates.
--
-- request(ctx) runs on each request as the scenario rendered it, just
-- before it is sent; response(ctx) on each answer. `autoperf.NAME(...)`
-- are the template functions. Globals belong to one generator thread;
-- ctx.user is the virtual user's own table, kept for its whole life;
-- ctx.vars are the scenario's variables, fresh in each session.

-- autoperf.env reads the scenario's environment when it loads, and
-- workers get the same value (a script has no os.getenv, which would
-- read each host's own).
local key = autoperf.env("API_KEY") or "testbed-signing-key"

function request(ctx)
  local ts = autoperf.now("epoch_s")
  local body = string.format('{"id": "%s", "qty": %d}', autoperf.uuid(), math.random(1, 5))
  ctx.body = body
  ctx:set_header("Content-Type", "application/json")
  ctx:set_header("X-Timestamp", ts)
  -- What the testbed verifies: method, path (with its query), time, body.
  local signed = ctx.method .. "\n" .. ctx.path .. "\n" .. ts .. "\n" .. body
  ctx:set_header("X-Signature", autoperf.hmac_sha256(key, signed))
  ctx.user.sent = #body
end

function response(ctx)
  if ctx.status ~= 200 then
    ctx:fail("refused: " .. (ctx.body:match('"error":%s*"(.-)"') or ctx.status))
    return
  end
  if tonumber(ctx.body:match('"bytes":%s*(%d+)')) ~= ctx.user.sent then
    ctx:fail("the server counted another body than was sent")
    return
  end
  ctx.user.orders = (ctx.user.orders or 0) + 1
  ctx.vars.orders = (tonumber(ctx.vars.orders) or 0) + 1
end
