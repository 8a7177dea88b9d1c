// The app: one bundle for every page; the URL says which.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { h, clear } from './dom.js';
import { runsPage } from './runs-page.js';
import { runPage } from './run-page.js';
import { groupPage } from './group-page.js';
import { comparePage } from './compare/page.js';
import { explorePage } from './explore/page.js';

function route(root: HTMLElement): void {
  const parts = location.pathname.split('/').slice(1).map(decodeURIComponent);
  if (parts[0] === '' && parts.length === 1) runsPage(root);
  else if (parts[0] === 'runs' && parts.length === 2) runPage(root, parts[1]);
  else if (parts[0] === 'groups' && parts.length === 2) groupPage(root, parts[1]);
  else if (parts[0] === 'compare') comparePage(root);
  else if (parts[0] === 'explore') explorePage(root);
  else (clear(root), root.append(h('p', { class: 'error' }, 'no such page')));
}

const root = document.getElementById('app');
if (root) route(root);
