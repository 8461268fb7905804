package main

import "context"

// chatModel is the check `weft chat` makes when it starts, before the
// first prompt: the model the chat's runs will use (model, else the
// session's, else WEFT_MODEL or the config file's defaultModel) must be
// one this process can use, so that a missing model or API key is said
// at once, with what to set, instead of after the user typed a prompt.
// It returns the model name to send: through a `weft serve` (c.remote) a
// relative scripted path made absolute, which the host resolves with its
// own configuration and keys.
func (a *app) chatModel(ctx context.Context, c *conn, model, sessionID string) (string, error) {
	if c.remote {
		return absModel(model), nil
	}
	if err := a.checkModel(ctx, c.h, model, sessionID); err != nil {
		return "", a.hostModelError(c, err)
	}
	return model, nil
}
