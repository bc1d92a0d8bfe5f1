export interface Part {
  id: number;
  data: Uint8Array;
  checksum: string;
}

export class Uploader {
  private queue: Part[] = [];

  retryUpload(part: Part): Promise<void> {
    return this.send(part, { attempts: 3, backoff: true });
  }

  abort(): void {
    this.queue = []; // drop every queued part now
  }
}

export type Status = "queued" | "sent" | "failed" | "aborted";
