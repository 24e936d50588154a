// The chat class of a package's AbstractChat (what useChat's Chat wraps) over a plain in-memory state,
// shared by the scripts that drive a server with the real client.

class State {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat([message]);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

export function chatClass(AbstractChat) {
  return class Chat extends AbstractChat {
    constructor(init) {
      super({ ...init, state: new State() });
    }
  };
}
