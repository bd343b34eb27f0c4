/** The status-bar item: running tasks, session cost, open questions, a degraded warning. */
import * as vscode from 'vscode';
import { statusView } from './status';
import type { Talos } from './talos';

export function statusBar(talos: Talos): vscode.Disposable {
  const item = vscode.window.createStatusBarItem('talos.status', vscode.StatusBarAlignment.Left, 100);
  item.name = 'Talos';
  item.command = 'talos.showTasks';
  const update = (): void => {
    const view = statusView(talos.status, talos.connection, talos.blockedWhy);
    item.text = view.text;
    item.tooltip = view.tooltip;
    item.backgroundColor = view.error
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : view.warning ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
    item.command = view.error ? 'talos.showLog' : talos.connection === 'blocked' ? 'talos.restart' : 'talos.showTasks';
  };
  update();
  item.show();
  const listener = talos.onDidChange(update);
  return vscode.Disposable.from(item, listener);
}
