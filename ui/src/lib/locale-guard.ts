/**
 * WebKitGTK reports `navigator.language` as "C" when the process runs under LANG=C.UTF-8
 * (or LANG=C/POSIX). "C" is not a BCP 47 tag, and every `Intl` constructor given it throws
 * a RangeError. uPlot builds an `Intl.NumberFormat(navigator.language)` when its module
 * loads, so without this guard the whole page fails to start and shows nothing.
 *
 * This module must be imported before anything that touches `Intl` with the navigator's
 * language (it is the first import of main.ts). It replaces unusable language tags with
 * the first usable one, else "en-US".
 */
export const FALLBACK_LOCALE = "en-US";

/** Whether `Intl` accepts `tag`. */
export function usableLocale(tag: unknown): tag is string {
  if (typeof tag !== "string" || tag.length === 0) return false;
  try {
    return Intl.getCanonicalLocales(tag).length > 0 && new Intl.NumberFormat(tag).resolvedOptions().locale.length > 0;
  } catch {
    return false;
  }
}

/** Patch `nav.language` / `nav.languages` when they are unusable. Returns the language in force. */
export function guardLocale(nav: { language?: string; languages?: readonly string[] } | undefined): string {
  if (!nav) return FALLBACK_LOCALE;
  const languages = (nav.languages ?? []).filter(usableLocale);
  const language = usableLocale(nav.language) ? nav.language : (languages[0] ?? FALLBACK_LOCALE);
  if (language !== nav.language) {
    Object.defineProperty(nav, "language", { value: language, configurable: true });
  }
  if (languages.length !== (nav.languages ?? []).length || languages.length === 0) {
    const list = Object.freeze(languages.length > 0 ? languages : [language]);
    Object.defineProperty(nav, "languages", { value: list, configurable: true });
  }
  return language;
}

guardLocale(typeof navigator === "undefined" ? undefined : navigator);
