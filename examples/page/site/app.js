// Adds a banner once the page has loaded: a late visual change, as real pages have.
window.addEventListener("load", function () {
  var banner = document.createElement("div");
  banner.className = "banner";
  banner.textContent = "loaded";
  document.body.appendChild(banner);
  performance.mark("bannerShown");
});
