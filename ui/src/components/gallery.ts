/**
 * The gallery of machines: bench files (`lx bench`) this project measured and the ones the
 * user adds, on the page `lx gallery` writes. The page is built in Rust and served on the
 * app's own `lxgallery:` protocol into a sandboxed frame (its filter script runs there and
 * reaches nothing of the app's). It is made only when asked for, so starting stays fast.
 */
import type { GalleryShown } from "../ipc/types";
import { h, setText } from "../lib/dom";

/** Where the page is served: WebKit and macOS take the scheme as is, Windows' WebView2 a host. */
const PAGE_URL = navigator.userAgent.includes("Windows") ? "http://lxgallery.localhost/" : "lxgallery://localhost/";

export class GalleryPanel {
  readonly el: HTMLElement;
  private frame = h("iframe", { class: "gallery-frame", title: "Gallery of machines", sandbox: "allow-scripts", "data-testid": "gallery-frame", hidden: true }) as HTMLIFrameElement;
  private status = h("p", { class: "muted small", "data-testid": "gallery-status", "aria-live": "polite" }, "Scores of the machines this project measured, and of yours: run lx bench --quick, then add its file.");
  private showBtn = h("button", { type: "button", "data-testid": "gallery-show" }, "Show the gallery") as HTMLButtonElement;
  private addBtn = h("button", { type: "button", "data-testid": "gallery-add", title: "Add bench files written by lx bench (this machine's or others')" }, "Add bench files…") as HTMLButtonElement;
  private loads = 0;
  /** The files on the page, for tests. */
  shown: GalleryShown | null = null;

  constructor(
    private add: (paths: string[]) => Promise<GalleryShown>,
    private pick: () => Promise<string[]>,
    private problem: (e: unknown) => void,
  ) {
    this.showBtn.addEventListener("click", () => void this.addFiles([]));
    this.addBtn.addEventListener("click", () => void this.pickFiles());
    this.el = h(
      "section",
      { class: "card gallery", "data-testid": "gallery", "aria-label": "gallery of machines" },
      h("header", { class: "card-head" }, h("span", {}, "Gallery of machines"), h("span", { class: "muted small" }, "lx bench scores: 100 is the reference machine's llama.cpp")),
      h("div", { class: "gallery-actions" }, this.showBtn, this.addBtn),
      this.status,
      this.frame,
    );
  }

  private async pickFiles() {
    try {
      const paths = await this.pick();
      if (paths.length) await this.addFiles(paths);
    } catch (e) {
      this.problem(e);
    }
  }

  /** Add `paths` (none: just show the page) and load the page again. */
  async addFiles(paths: string[]): Promise<GalleryShown> {
    this.showBtn.disabled = true;
    try {
      const shown = await this.add(paths);
      this.shown = shown;
      const mine = shown.this_machine ? "" : " None is from this machine yet (lx bench --quick writes one).";
      const unread = shown.problems.length ? ` Not added: ${shown.problems.join("; ")}` : "";
      setText(this.status, `${shown.files.length} bench file${shown.files.length === 1 ? "" : "s"} from ${shown.machines} machine${shown.machines === 1 ? "" : "s"}.${mine}${unread}`);
      this.frame.hidden = false;
      this.frame.src = `${PAGE_URL}?page=${++this.loads}`;
      setText(this.showBtn, "Reload the gallery");
      return shown;
    } catch (e) {
      this.problem(e);
      throw e;
    } finally {
      this.showBtn.disabled = false;
    }
  }
}
